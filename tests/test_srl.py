"""SRL: instances of a CoNLL-2012 file, the CoNLL-2005 evaluation's figures, constrained
Viterbi, the props layout, and `elmo task train|evaluate|predict --task srl` end to end."""

from __future__ import annotations

import json

import pytest
import torch

from elmo.cli import main
from elmo.tasks.conll2012 import Sentence, bracket_spans
from elmo.tasks.data import held_out_split
from elmo.tasks.registry import TASKS
from elmo.tasks.srl import constrained_viterbi, transitions
from elmo.tasks.srl_data import SrlInstance, props_lines, read_srl, spans_to_tags, tags_to_spans
from elmo.tasks.srl_eval import srl_scores
from tests.helpers.conll2012 import srl_text, write_conll2012

V = ("V", 3, 3)
# (gold propositions, predicted propositions, (correct, excess, missed, F1)): the figures
# srl-eval.pl (CoNLL-2005) prints on these propositions written in the props layout
SCRIPT_CASES = {
    "exact": ([[("ARG0", 0, 1), V, ("ARG1", 4, 6)]], [[("ARG0", 0, 1), V, ("ARG1", 4, 6)]],
              (2, 0, 0, 100.0)),
    "wrong label": ([[("ARG0", 0, 1), V, ("ARG1", 4, 6)]],
                    [[("ARG2", 0, 1), V, ("ARG1", 4, 6)]], (1, 1, 1, 50.0)),
    "wrong boundaries": ([[("ARG0", 0, 1), V, ("ARG1", 4, 6)]],
                         [[("ARG0", 0, 0), V, ("ARG1", 4, 7)]], (0, 2, 2, 0.0)),
    "continuation missed": ([[("ARG1", 0, 1), V, ("C-ARG1", 5, 6)]], [[("ARG1", 0, 1), V]],
                            (0, 1, 1, 0.0)),
    "continuation found": ([[("ARG1", 0, 1), V, ("C-ARG1", 5, 6)]],
                           [[("ARG1", 0, 1), V, ("C-ARG1", 5, 6)]], (1, 0, 0, 100.0)),
    "continuation predicted only": ([[("ARG1", 0, 1), V]],
                                    [[("ARG1", 0, 1), V, ("C-ARG1", 5, 6)]], (0, 1, 1, 0.0)),
    "continuation without head": ([[("ARG1", 5, 6), V]], [[V, ("C-ARG1", 5, 6)]],
                                  (1, 0, 0, 100.0)),
    "continuation one phrase off": ([[("ARG1", 0, 1), V, ("C-ARG1", 5, 6)]],
                                    [[("ARG1", 0, 1), V, ("C-ARG1", 5, 7)]], (0, 1, 1, 0.0)),
    "one span over a discontinuous one": ([[("ARG1", 0, 1), V, ("C-ARG1", 5, 6)]],
                                          [[("ARG1", 0, 6)]], (0, 1, 1, 0.0)),
    "two continuations": ([[("ARG1", 0, 0), V, ("C-ARG1", 4, 4), ("C-ARG1", 6, 7)]],
                          [[("ARG1", 0, 0), V, ("C-ARG1", 6, 7)]], (0, 1, 1, 0.0)),
    "reference roles apart": ([[("ARG0", 0, 0), ("R-ARG0", 1, 1), V, ("ARG1", 4, 6)]],
                              [[("ARG0", 0, 0), V, ("R-ARG0", 4, 6)]], (1, 1, 2, 40.0)),
    "reference found": ([[("ARG0", 0, 0), ("R-ARG0", 1, 1), V]],
                        [[("ARG0", 0, 0), ("R-ARG0", 1, 1), V]], (2, 0, 0, 100.0)),
    "V not counted": ([[("ARG0", 0, 1), V]], [[("ARG0", 0, 1), ("V", 2, 3)]],
                      (1, 0, 0, 100.0)),
    "an argument on V": ([[("ARG0", 0, 1), V]], [[("ARG0", 0, 1), ("ARG1", 3, 3)]],
                         (1, 1, 0, 66.67)),
    "two propositions": ([[("ARG0", 0, 1), V, ("ARG1", 4, 6)],
                          [("ARG0", 0, 2), ("ARGM-TMP", 3, 3), ("V", 5, 5)]],
                         [[("ARG0", 0, 1), V], [("ARG0", 0, 2), ("V", 5, 5), ("ARG1", 6, 7)]],
                         (2, 1, 2, 57.14)),
    "nothing predicted": ([[("ARG0", 0, 1), V, ("ARG1", 4, 6)]], [[V]], (0, 0, 2, 0.0)),
}


@pytest.mark.parametrize("case", SCRIPT_CASES)
def test_srl_f1_gives_the_conll2005_scripts_figures(case):
    gold, predicted, (correct, excess, missed, f1) = SCRIPT_CASES[case]
    scores = srl_scores(gold, predicted)
    assert (scores["correct"], scores["excess"], scores["missed"]) == (correct, excess, missed)
    assert scores["f1"] == pytest.approx(f1, abs=0.005)


def test_constrained_viterbi_never_continues_another_role():
    labels = ("B-ARG0", "B-ARG1", "I-ARG0", "I-ARG1", "O")
    allowed, first = transitions(labels)
    # the best tag of each token alone would be O, I-ARG1, I-ARG1: an I- with no B- before
    log_p = torch.tensor([[-3, -3, -3, -3, -0.1], [-3, -2, -3, -0.1, -1.0],
                          [-3, -3, -3, -0.1, -3]]).log_softmax(-1)
    path = [labels[t] for t in constrained_viterbi(log_p, allowed, first)]
    assert path[0] != "I-ARG1" and "I-ARG1" in path
    for before, tag in zip(["O", *path], path, strict=False):
        if tag.startswith("I-"):
            assert before in (f"B-{tag[2:]}", tag)
    assert path == ["O", "B-ARG1", "I-ARG1"]
    # a first I- is never taken, even when it is every token's best
    log_p = torch.tensor([[-5, -5, -0.01, -5, -5]]).log_softmax(-1)
    assert labels[constrained_viterbi(log_p, allowed, first)[0]] != "I-ARG0"


def test_bio_round_trip():
    spans = [("ARG0", 0, 1), ("V", 2, 2), ("C-ARG1", 4, 6)]
    tags = spans_to_tags(spans, 8)
    assert tags == ["B-ARG0", "I-ARG0", "B-V", "O", "B-C-ARG1", "I-C-ARG1", "I-C-ARG1", "O"]
    assert tags_to_spans(tags) == spans
    assert tags_to_spans(["I-ARG0", "I-ARG1"]) == [("ARG0", 0, 0), ("ARG1", 1, 1)]


def test_instances_one_per_predicate_and_sentences_without(tmp_path):
    instances = read_srl(write_conll2012(tmp_path / "g_gold_conll.xz", srl_text(2, 0)))
    # 2 documents x 4 sentences: one with two predicates, the second's last without any
    assert [i.predicate for i in instances] == [1, 1, 1, 3, 1, 1, 1, 1, 3, None]
    third = instances[2]
    assert instances[3].sentence is third.sentence
    assert third.tags == ["B-ARG0", "B-V", "B-ARG1", "I-ARG1", "I-ARG1", "O"]
    assert instances[3].tags == ["O", "O", "B-ARG0", "B-V", "B-ARG1", "O"]


def test_props_layout():
    sentence = Sentence(["He", "said", "she", "left", "."], ["X"] * 5, ["-"] * 5, ["-"] * 5,
                        [], [], [], 1, [])
    empty = Sentence(["Hi", "."], ["X"] * 2, ["-"] * 2, ["-"] * 2, [], [], [], 7, [])
    # the instances of a sentence in any order: columns come in the predicates' order
    instances = [SrlInstance(sentence, 3, []), SrlInstance(sentence, 1, []),
                 SrlInstance(empty, None, [])]
    spans = [[("ARG0", 2, 2), ("V", 3, 3)], [("ARG0", 0, 0), ("V", 1, 1), ("ARG1", 2, 3)], []]
    assert props_lines(instances, spans) == [
        "-\t(ARG0*)\t*", "said\t(V*)\t*", "-\t(ARG1*\t(ARG0*)", "left\t*)\t(V*)", "-\t*\t*",
        "", "-", "-", ""]


def _props(path):
    """The propositions of a props file: (predicate position, labelled spans) per sentence."""
    sentences, rows = [], []
    for line in path.read_text().splitlines():
        if line:
            rows.append(line.split("\t"))
            continue
        columns = list(zip(*rows, strict=True))
        predicates = [i for i, w in enumerate(columns[0]) if w != "-"]
        lines = list(range(len(rows)))
        sentences.append([(p, bracket_spans(path, lines, c))
                          for p, c in zip(predicates, columns[1:], strict=True)])
        rows = []
    return sentences


def test_train_evaluate_predict(tmp_path, tiny_model, capsys):
    for split, documents, seed in (("train", 12, 0), ("dev", 3, 1), ("test", 3, 2)):
        write_conll2012(tmp_path / f"{split}_gold_conll", srl_text(documents, seed))
    args = ["task", "train", "--task", "srl", "--format", "conll2012",
            "--train", str(tmp_path / "train_gold_conll"),
            "--dev", str(tmp_path / "dev_gold_conll"),
            "--test", str(tmp_path / "test_gold_conll"), "--elmo", str(tiny_model),
            "--out", str(tmp_path / "run"), "--epochs", "6", "--hidden-dim", "16",
            "--embedding-dim", "16", "--batch-size", "8", "--lr", "0.02",
            "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    assert main(args) == 0
    run = tmp_path / "run"
    result = json.loads((run / "result.json").read_text())
    assert result["metric"] == "srl-f1" and result["n_train"] == 12 * 5 - 6
    saved = json.loads((run / "config.json").read_text())
    assert saved["task"]["elmo_at"] == "input" and saved["model"]["num_layers"] == 2
    assert saved["data"]["train"] == {"predicates": 54, "sentences": 48}
    assert result["test"] > 80  # the roles follow from the words and their order

    cache = ["--cache-dir", str(tmp_path / "cache"), "--quiet"]
    capsys.readouterr()
    assert main(["task", "evaluate", str(run), "--test", str(tmp_path / "test_gold_conll"),
                 "--json", *cache]) == 0
    evaluation = json.loads(capsys.readouterr().out)
    assert evaluation["score"] == pytest.approx(result["test"])
    assert (evaluation["propositions"], evaluation["n"]) == (3 * 5 - 1, 3 * 5)

    out = tmp_path / "predicted.props"
    assert main(["task", "predict", str(run), str(tmp_path / "test_gold_conll"), str(out),
                 *cache]) == 0
    predicted = _props(out)
    gold = read_srl(tmp_path / "test_gold_conll")
    sentences = list({id(i.sentence): i.sentence for i in gold}.values())
    assert len(predicted) == len(sentences) == 12
    assert [[p for p, _ in s] for s in predicted] == [
        [p.predicate for p in s.predicates] for s in sentences]
    assert predicted[7] == []  # the second document's last sentence has no predicate
    # the file scores as evaluate says (the evaluation reads the same propositions)
    pairs = [(i.arguments, spans) for i, (_, spans) in zip(
        [i for i in gold if i.predicate is not None],
        [p for s in predicted for p in s], strict=True)]
    assert srl_scores(*zip(*pairs, strict=True))["f1"] == pytest.approx(evaluation["score"])


def test_bad_input_is_one_line(tmp_path, capsys):
    text = srl_text(2, 0)
    write_conll2012(tmp_path / "train_gold_conll", text.replace("(ARG1*)", "(ARG1*", 1))
    write_conll2012(tmp_path / "dev_gold_conll", text)
    assert main(["task", "train", "--task", "srl", "--format", "conll2012", "--train",
                 str(tmp_path / "train_gold_conll"), "--dev", str(tmp_path / "dev_gold_conll"),
                 "--elmo", "none", "--out", str(tmp_path / "run"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "train_gold_conll, line 4: span (ARG1 is never closed" in err
    assert "Traceback" not in err and not (tmp_path / "run" / "config.json").exists()


def test_sample_efficiency_takes_srl(tmp_path, tiny_model, capsys):
    data = write_conll2012(tmp_path / "train_gold_conll", srl_text(4, 3))
    args = ["analyze", "sample-efficiency", "--out", str(tmp_path / "runs"), "--model",
            str(tiny_model), "--fractions", "0.5,1", "--seeds", "0", "--quiet", "--json", "--",
            "--task", "srl", "--format", "conll2012", "--train", str(data), "--dev", str(data),
            "--epochs", "1", "--hidden-dim", "8", "--embedding-dim", "8",
            "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "srl-f1" and len(result["runs"]) == 4
    # 18 predicates and 2 sentences without: half the instances hold 9 or 10 predicates
    assert {r["n_train"] for r in result["runs"] if r["fraction"] == 1} == {18}
    assert {r["n_train"] for r in result["runs"] if r["fraction"] == 0.5} < set(range(8, 11))


def test_task_text_writes_each_sentence_once(tmp_path):
    data = write_conll2012(tmp_path / "g_gold_conll.xz", srl_text(2, 0))
    assert main(["task", "text", "--format", "conll2012", str(data),
                 str(tmp_path / "text.txt")]) == 0
    lines = (tmp_path / "text.txt").read_text().splitlines()
    assert len(lines) == 8 and lines[2].split()[1] == "said"  # two predicates, one line


def test_dev_fraction_holds_out_whole_documents(tmp_path):
    data = write_conll2012(tmp_path / "train_gold_conll", srl_text(4, 0))
    assert main(["task", "train", "--task", "srl", "--format", "conll2012", "--train",
                 str(data), "--dev-fraction", "0.25", "--elmo", "none", "--epochs", "1",
                 "--hidden-dim", "8", "--embedding-dim", "8",
                 "--out", str(tmp_path / "run"), "--quiet"]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    # 4 documents of 5 predicates (the odd ones: 4 and a sentence without); one held out
    assert result["n_train"] in (13, 14)
    data_notes = json.loads((tmp_path / "run" / "config.json").read_text())["data"]
    assert data_notes["dev"]["sentences"] == 4
    instances = read_srl(data)
    _, held = held_out_split(len(instances), 0.25, TASKS["srl"].held_out_groups(instances))
    assert len({instances[i].sentence.document for i in held}) == 1
    assert len({id(instances[i].sentence) for i in held}) == 4  # all of its sentences
