"""Markup -> paragraphs of plain text: Markdown files (`markdown_paragraphs`) and strings of
HTML, as JSON exports of web pages and news sites hold them (`html_paragraphs`).

Only what carries no prose is removed: Markdown's front matter, headings (the first one is
the document's title), HTML comments and tags, fenced code, rules and table separators, and
the markers of lists, quotes, emphasis, links and images; HTML's tags (a paragraph ends at a
block tag: p, br, div, li, headings, table rows) and entities. A paragraph is a line of what
is left, stripped, none empty.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator

_FRONT_MATTER = ("---", "+++")  # YAML's and TOML's fences, on the first line
_HEADING = re.compile(r" {0,3}#{1,6}(?:\s+(?P<text>.*?))?(?:\s+#+)?\s*")
_FENCE = re.compile(r" {0,3}(```|~~~)")
_RULE = re.compile(r" {0,3}([-*_])(?:\s*\1){2,}\s*")
_TABLE_SEPARATOR = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*")
_BLOCK_MARKER = re.compile(r"\s*(?:>\s*)*(?:[-*+]\s+|\d{1,9}[.)]\s+)?")
_COMMENT = re.compile(r"<!--.*?-->")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|`+)(?=\S)(.+?)(?<=\S)\1")
_TABLE_ROW = re.compile(r"\s*\|(.*)\|\s*")
# An HTML tag: '<' and a letter (or '/' and a letter); "a < b" is text.
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_BLOCK_TAG = re.compile(r"</?(?:p|br|div|li|ul|ol|h[1-6]|tr|table|blockquote|section)\b"
                        r"[^<>]*>", re.IGNORECASE)


def _inline(text: str) -> str:
    """A Markdown line's text: images dropped, links as their text, emphasis markers, HTML
    tags and a table row's bars removed."""
    row = _TABLE_ROW.fullmatch(text)
    if row:
        text = " ".join(cell.strip() for cell in row[1].split("|"))
    text = _LINK.sub(r"\1", _IMAGE.sub("", text))
    return _EMPHASIS.sub(r"\2", _TAG.sub("", text))


def markdown_paragraphs(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str, str]]:
    """(1-based line, paragraph, title) for the prose lines of a Markdown file given as
    (0-based number, text) lines; `title` is the text of its first heading ("" before it)."""
    title, fence, in_comment, front = "", None, False, None
    for number, raw in lines:
        line = raw.strip()
        if number == 0 and line in _FRONT_MATTER:
            front = line
            continue
        if front is not None:
            front = None if line == front else front
            continue
        if in_comment:  # an HTML comment over several lines
            if "-->" not in line:
                continue
            line, in_comment = line.split("-->", 1)[1].strip(), False
        line = _COMMENT.sub("", line)
        if "<!--" in line:
            line, in_comment = line.split("<!--", 1)[0].strip(), True
        if _FENCE.match(raw):
            fence = None if fence else _FENCE.match(raw)[1]
            continue
        if fence or not line or _RULE.fullmatch(line) or _TABLE_SEPARATOR.fullmatch(line):
            continue
        heading = _HEADING.fullmatch(line)
        if heading:
            title = title or _inline(heading["text"] or "").strip()
            continue
        text = _inline(line[_BLOCK_MARKER.match(line).end():]).strip()
        if text:
            yield number + 1, text, title


def html_paragraphs(text: str) -> list[str]:
    """The paragraphs of a string that may hold HTML: cut at line breaks and block tags, the
    other tags removed, entities unescaped; stripped, none empty."""
    text = _TAG.sub("", _BLOCK_TAG.sub("\n", text))
    return [p for p in (html.unescape(line).strip() for line in text.splitlines()) if p]
