"""The options of `elmo train`, `elmo analyze` and `elmo task`, made from the records that own
them, are the ones these commands had when they were written by hand (tests/cli_options.json,
written by `python -m tests.helpers.cli_options` from those parsers): names, defaults,
choices, how values are read, groups, order and help."""

from __future__ import annotations

import json

import pytest

from elmo.cli.task import FORMAT_OPTIONS
from elmo.loading.formats.registry import FORMATS
from elmo.tasks.readers import FORMATS as TASK_FORMATS
from elmo.tasks.registry import TASKS
from tests.helpers.cli_options import FIXTURE, command_options

BEFORE = json.loads(FIXTURE.read_text(encoding="utf-8"))
NOW = command_options()
# Help changed on purpose: --model listed 3 of the model formats by hand; it names them all.
MODEL_HELP = {("analyze wsd", "--model"), ("analyze neighbours", "--model"),
              ("analyze probe", "--model")}
# And (issue 69): --quantize links to the table of docs/speed.md instead of repeating its
# figures; --input-format names the folders of WikiExtractor --compress's wiki_NN.bz2.
ISSUE_69_HELP = {("analyze wsd", "--quantize"), ("analyze neighbours", "--quantize"),
                 ("analyze probe", "--quantize"), ("train", "--input-format")}
# And (issue 70): --init-from a run's --weights-copy continues that run.
ISSUE_70_HELP = {("train", "--init-from"), ("train", "--weights-copy")}
# And --elmo-at's default is the task kind's (its record in elmo.tasks.registry.TASKS).
KIND_DEFAULT = {("task train", "--elmo-at")}


def test_the_same_commands():
    assert list(NOW) == list(BEFORE)


@pytest.mark.parametrize("command", list(BEFORE))
def test_options_unchanged(command):
    before, now = BEFORE[command], NOW[command]
    assert list(now) == list(before)  # the same options, in the same order
    for name, option in before.items():
        changed = {"help"} if (command, name) in MODEL_HELP | ISSUE_69_HELP | ISSUE_70_HELP \
            else {"help", "default"} if (command, name) in KIND_DEFAULT else set()
        assert {k: v for k, v in now[name].items() if k not in changed} == \
            {k: v for k, v in option.items() if k not in changed}, name


@pytest.mark.parametrize("command, name", sorted(MODEL_HELP))
def test_model_help_names_every_format(command, name):
    help = NOW[command][name]["help"]
    assert all(f.name in help for f in FORMATS.values()), help
    assert "(default: default, the shipped model)" in help


def test_init_from_and_weights_copy_say_that_a_copy_continues_its_run():
    assert "--weights-copy DIR of a run" in NOW["train"]["--init-from"]["help"]
    assert "progress.json" in NOW["train"]["--weights-copy"]["help"]
    assert "--init-from DIR continues the run" in NOW["train"]["--weights-copy"]["help"]


def test_elmo_at_help_names_each_kinds_default():
    option = NOW["task train"]["--elmo-at"]
    assert option["default"] is None
    assert all(f"{name} {kind.elmo_at}" in option["help"] for name, kind in TASKS.items())


def test_task_takes_every_dataset_formats_options():
    """`elmo task train` and `text` offer the options of every record of the task FORMATS."""
    read = {name for dataset in TASK_FORMATS.values() for name in dataset.options}
    assert set(FORMAT_OPTIONS) == read - {"task"} | {"format", "encoding_errors"}
    for action in ("task train", "task text"):
        dests = {option["dest"] for option in NOW[action].values()}
        assert set(FORMAT_OPTIONS) <= dests
