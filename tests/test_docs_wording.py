"""The docs speak of the software and its measurements (the card, the versions, the command),
never of how the work was done: which machine was lent to whom, sessions, the issues that asked
for a change, what has not run yet. A reader needs the measurement, not its history.

The words are looked for in the prose of README.md, docs/*.md and the shipped model cards:
code (fenced blocks and `inline code`) and link targets are left out, where "session" is an
ONNX Runtime `InferenceSession` or simple_elmo's `session=` argument. Each pattern was chosen
to have no legitimate use in this prose:
- "lent"/"lend", "lease": how a machine came to be used, not what it is (name the card);
- "session": a working session (a measurement sitting is "one sitting");
- "issue" unless it is another project's tracker reference ("EfML issue #30", followed by #),
  and "the issues" (not the verb, "a step issues kernels"): our issues ("issue 50", "the
  issue's target") are how work was asked for;
- "not run yet", "not been tested", "to be re-run", "not measured yet": the state of the work;
  say what was measured, on what, or that a path has no test;
- "this tree", "device time": the author's working copy, a budget of the work.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"),
                *(REPO / "src" / "elmo" / "pretrained").glob("*/MODEL_CARD.md")])
WORK_WORDS = re.compile(
    r"\blent\b|\blend(s|ing)?\b|\bleases?d?\b|\bsessions?\b|\bissue\b(?!\s*#)"
    r"|\b(the|our|these|open|two|several) issues\b"
    r"|\bnot (been )?run yet\b|\bhas not run\b|\bhave not run\b|\bnot been tested\b"
    r"|\bto be re-?run\b|\bnot (been )?measured yet\b|\bnot yet (run|tested|measured)\b"
    r"|\bthis tree\b|\bdevice time\b", re.IGNORECASE)
CODE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def prose(text: str) -> str:
    """`text` without code and link targets, each removed part kept as blank lines so that
    line numbers stay."""
    text = CODE.sub(lambda m: "\n" * m.group().count("\n"), text)
    return LINK_TARGET.sub("]()", INLINE_CODE.sub("``", text))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_words_of_the_work_in_the_docs(page: Path):
    found = [f"{page.relative_to(REPO)}:{number}: {match.group()!r} in: {line.strip()}"
             for number, line in enumerate(prose(page.read_text(encoding="utf-8"))
                                           .splitlines(), 1)
             for match in WORK_WORDS.finditer(line)]
    assert not found, "say the measurement (card, versions, command) instead:\n" + \
        "\n".join(found)


def test_the_words_are_found_and_code_is_left_out():
    caught = prose("A GPU lent to this session; the target of the issue; tests have not run "
                   "yet.\n`session.run(None, x)`\n```python\nsession = InferenceSession(p)\n```\n"
                   "EfML issue #30, [the lease](lease.md).\n")
    assert [m.group() for m in WORK_WORDS.finditer(caught)] == [
        "lent", "session", "issue", "have not run", "lease"]
    assert not WORK_WORDS.search("A step issues thousands of small operations.")  # a verb
