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

Pages tidied for users also carry no narration of how they were made (NARRATION): no dates
(a measurement's date is in its results file, benchmarks/results/), "the device" (say the
GPU), a "payload" or a machine's "call" ("one call's load", "two calls of", `call2`: how work
reached a machine; a function's call is fine), "the target of" or "not reached" (what the work
aimed at), "this project's ... machine" (name the CPU).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = sorted([REPO / "README.md", REPO / "benchmarks" / "README.md",
                *(REPO / "docs").glob("*.md"),
                *(REPO / "src" / "elmo" / "pretrained").glob("*/MODEL_CARD.md")])
WORK_WORDS = re.compile(
    r"\blent\b|\blend(s|ing)?\b|\bleases?d?\b|\bsessions?\b|\bissue\b(?!\s*#)"
    r"|\b(the|our|these|open|two|several) issues\b"
    r"|\bnot (been )?run yet\b|\bhas not run\b|\bhave not run\b|\bnot been tested\b"
    r"|\bto be re-?run\b|\bnot (been )?measured yet\b|\bnot yet (run|tested|measured)\b"
    r"|\bthis tree\b|\bdevice time\b", re.IGNORECASE)
NARRATION = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\bthe device\b|\bpayloads?\b|\bcall\d+\b|\bcall's( load)?\b"
    r"|\b(two|three|several|first|second) calls? of\b"
    r"|\btarget of\b|\bnot reached\b|\bthis project'?s?\b[^.]{0,40}?\bmachines?\b",
    re.IGNORECASE)
CODE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def prose(text: str) -> str:
    """`text` without code and link targets, each removed part kept as blank lines so that
    line numbers stay."""
    text = CODE.sub(lambda m: "\n" * m.group().count("\n"), text)
    return LINK_TARGET.sub("]()", INLINE_CODE.sub("``", text))


def found_in(page: Path, words: re.Pattern) -> list[str]:
    return [f"{page.relative_to(REPO)}:{number}: {match.group()!r} in: {line.strip()}"
            for number, line in enumerate(prose(page.read_text(encoding="utf-8"))
                                          .splitlines(), 1)
            for match in words.finditer(line)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_words_of_the_work_in_the_docs(page: Path):
    found = found_in(page, WORK_WORDS) + found_in(page, NARRATION)
    assert not found, "say the measurement (card, versions, command) instead:\n" + \
        "\n".join(found)


def test_the_words_are_found_and_code_is_left_out():
    caught = prose("A GPU lent to this session; the target of the issue; tests have not run "
                   "yet.\n`session.run(None, x)`\n```python\nsession = InferenceSession(p)\n```\n"
                   "EfML issue #30, [the lease](lease.md).\n")
    assert [m.group() for m in WORK_WORDS.finditer(caught)] == [
        "lent", "session", "issue", "have not run", "lease"]
    assert not WORK_WORDS.search("A step issues thousands of small operations.")  # a verb


def test_the_narration_is_found_and_a_function_call_is_not():
    caught = prose("Until 2026-11-26 the defaults were these. The device's run sent its payload "
                   "in one call's load of data; the target of 80 was not reached on this "
                   "project's 2-core CPU machine. Files: `call2/`, call2.\n")
    assert [m.group() for m in NARRATION.finditer(caught)] == [
        "2026-11-26", "The device", "payload", "call's load", "target of", "not reached",
        "this project's 2-core CPU machine", "call2"]
    for fine in ("after each call, the state carries over", "the same call",
                 "from one call to the next", "a GPU's memory", "calls `lstm_cell`",
                 "in the next call", "the rows handed to a call"):
        assert not NARRATION.search(prose(fine)), fine
