"""Every ```python block of README.md and docs/*.md runs as written (offline, fresh dir); every
`elmo` command line of their shell blocks names commands and options that exist."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def python_blocks(path: Path) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown file."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


# flair cannot install beside [dev] (docs/flair.md): its blocks run in `make test`'s flair venv
FLAIR_IMPORT = re.compile(r"^(?:from|import) (?:elmo\.)?flair\b", flags=re.M)

BLOCKS = [(path.relative_to(REPO), number, block)
          for path in DOCUMENTS for number, block in enumerate(python_blocks(path), 1)]


def test_readme_and_docs_have_python_blocks():
    assert python_blocks(REPO / "README.md")
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("name, number, block", BLOCKS,
                         ids=[f"{name}-{number}" for name, number, _ in BLOCKS])
def test_python_block_runs(name, number, block, tmp_path, monkeypatch):
    if FLAIR_IMPORT.search(block):
        pytest.importorskip("flair")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_OFFLINE", "1")  # a block that needs a download fails, not waits
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "cache"))
    code = compile(block, f"{name} python block {number}", "exec")
    exec(code, {})
    exec(code, {})  # twice: a block must not fail on the outputs of its own first run


def test_readme_first_example_then_its_shell_lines_run_in_one_directory(tmp_path, monkeypatch,
                                                                      capsys):
    """A reader runs the first example's Python, then the `elmo` lines after it, in one place."""
    from elmo.cli import main

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## A first example"):text.index("## Documentation")]
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", section, flags=re.S | re.M)
    lines = [line.split("#")[0] for info, block in blocks if not info
             for line in block.splitlines() if line.startswith("elmo ")]
    assert lines
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    exec(compile(python_blocks(REPO / "README.md")[0], "README.md python block 1", "exec"), {})
    for line in lines:
        try:
            status = main(shlex.split(line)[1:])
        except SystemExit as exit_:  # --help
            status = exit_.code
        assert status == 0, (line, capsys.readouterr().err)


LINKED = [*DOCUMENTS, REPO / "benchmarks" / "README.md",
          *sorted((REPO / "src" / "elmo" / "pretrained").glob("*/MODEL_CARD.md"))]
ANCHORED_LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def anchors(path: Path) -> list[str]:
    """The anchors GitHub gives the headings of a Markdown file: lower case, punctuation
    dropped, spaces as hyphens, a repeated one numbered."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    seen: dict[str, int] = {}
    found = []
    for heading in re.findall(r"^#+ (.*)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        found.append(slug if not seen[slug] else f"{slug}-{seen[slug]}")
    return found


def test_relative_links_resolve():
    """Every relative Markdown link of README.md, docs/*.md, benchmarks/README.md and the model
    cards names a file that exists, and a heading of it where it names one."""
    broken = []
    for path in LINKED:
        for target, anchor in ANCHORED_LINK.findall(path.read_text(encoding="utf-8")):
            linked = path if not target else path.parent / target
            if "://" in target or "@" in target:
                continue
            if not linked.exists():
                broken.append(f"{path.relative_to(REPO)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{path.relative_to(REPO)}: {target}#{anchor}")
    assert not broken, f"links to missing files or headings: {broken}"


def test_anchors_are_githubs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A title\n## Speed: int8 (`--quantize`)\n## A title\n```\n# not one\n```\n")
    assert anchors(page) == ["a-title", "speed-int8---quantize", "a-title-1"]


SHELL_BLOCK = re.compile(r"^```(?:bash|sh|console|shell)?\n(.*?)^```$", flags=re.S | re.M)
OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*")
# commands that pass the options after `--` on to another command
PASSED_ON = {"elmo analyze sample-efficiency": ["task", "train"]}


def elmo_lines(text: str) -> list[str]:
    """The `elmo ...` commands of a Markdown text's shell blocks (continuations joined)."""
    lines = []
    for block in SHELL_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            for command in re.split(r"&&|;|\s\|\s", line.strip().removeprefix("$ ")):
                command = command.split(" #")[0].strip()
                if re.match(r"elmo (?!=)", command):
                    lines.append(command)
    return lines


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((action.choices for action in parser._actions
                 if isinstance(action, argparse._SubParsersAction)), {})


def unknown_names(line: str, root: argparse.ArgumentParser) -> list[str]:
    """The commands and options of `line` that its parser does not know. An upper-case word
    or ... where a command goes (COMMAND, ACTION) ends the check."""
    parser, unknown = root, []
    for word in line.split()[1:]:
        if word == "--" and parser.prog in PASSED_ON:
            path, parser = PASSED_ON[parser.prog], root
            for name in path:
                parser = _commands(parser)[name]
        elif word.startswith(("-", "[-")):
            unknown += [f"{option} ({parser.prog})" for option in OPTION.findall(word)
                        if option not in parser._option_string_actions]
        elif _commands(parser):
            if word.isupper() or word.strip("[]") == "...":  # COMMAND: nothing more to check
                break
            if word not in _commands(parser):
                return [*unknown, f"command {word!r} ({parser.prog})"]
            parser = _commands(parser)[word]
    return unknown


def test_docs_command_lines_name_existing_commands_and_options():
    from elmo.cli import build_parser

    root = build_parser()
    lines = [(path.relative_to(REPO), line) for path in LINKED
             for line in elmo_lines(path.read_text(encoding="utf-8"))]
    assert len(lines) > 50
    wrong = [f"{path}: {line}: {name}" for path, line in lines
             for name in unknown_names(line, root)]
    assert not wrong, "\n".join(wrong)


def test_the_check_finds_a_misspelt_option_and_command():
    from elmo.cli import build_parser

    root = build_parser()
    assert unknown_names("elmo embed default in.txt out.hdf5 --layer top", root) == [
        "--layer (elmo embed)"]
    assert unknown_names("elmo task trian --task tagging", root) == [
        "command 'trian' (elmo task)"]
    assert unknown_names("elmo analyze sample-efficiency --out d -- --epoch 5", root) == [
        "--epoch (elmo task train)"]
    assert unknown_names("elmo [--threads N] COMMAND ...", root) == []
