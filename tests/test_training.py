"""The training recipe: schedules, layer groups, data stream, checkpoints, NaN guard,
early stopping, continued training. (CLI, kill -9 and DDP: test_train_cli.py and
test_train_distributed.py; their shared helpers: tests/helpers/training.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from elmo.chars import ByteIndexer, VocabIndexer, word_to_char_ids
from elmo.data.batching import BPTTConfig
from elmo.errors import ElmoError
from elmo.loading.formats.bilm_tf import save_bilm_tf
from elmo.loading.formats.native import save_pretrained
from elmo.modules.language_model import BiLanguageModel, LMLosses
from elmo.optim.groups import discriminative_lrs, layer_groups, trainable_groups
from elmo.optim.schedules import STLR_RATIO, lr_multiplier, slanted_triangular
from elmo.runs import (
    CHECKPOINT_NAME,
    MetricsLog,
    capture_rng,
    read_checkpoint_meta,
    restore_rng,
)
from elmo.training import clock as clock_module
from elmo.training import trainer as trainer_module
from elmo.training.checkpoint import Checkpoint, RankState
from elmo.training.config import TrainConfig
from elmo.training.evaluate import PerplexityTotals
from elmo.training.model_init import build_language_model
from elmo.training.step import StatsReading, StepStats
from elmo.training.stream import BatchEncoder, TrainStream
from elmo.training.trainer import Trainer, TrainingDiverged
from elmo.vocab import Vocabulary
from tests.conftest import random_bilm
from tests.helpers.training import assert_identical, run, run_files, tiny_config, write_corpus


def trained_like_dir(directory: Path, vocab: Vocabulary, seed: int = 3) -> Path:
    """A directory as `elmo train` leaves it (random weights): model, softmax, vocab.txt."""
    torch.manual_seed(seed)
    softmax = {"softmax.weight": torch.randn(len(vocab), 16),
               "softmax.bias": torch.randn(len(vocab))}
    save_pretrained(random_bilm(seed), directory, extra_tensors=softmax)
    vocab.save(directory / "vocab.txt")
    return directory


# ---- schedules and layer groups ---------------------------------------------------------


def test_slanted_triangular_schedule():
    total, frac = 100, 0.1  # cut = 10
    values = [slanted_triangular(t, total, frac) for t in range(total)]
    assert values[0] == pytest.approx(1 / STLR_RATIO)
    assert values[5] == pytest.approx((1 + 0.5 * 31) / 32)
    assert values[10] == pytest.approx(1.0) and max(values) == pytest.approx(1.0)
    assert values[-1] == pytest.approx(1 / STLR_RATIO)
    assert all(a < b for a, b in zip(values[:10], values[1:11], strict=True))
    assert all(a > b for a, b in zip(values[10:-1], values[11:], strict=True))
    assert lr_multiplier("slanted-triangular", 5, total, frac) == values[5]
    assert all(lr_multiplier("constant", t, total) == 1.0 for t in (0, 50, 99))


def test_layer_groups_and_discriminative_learning_rates():
    lm = BiLanguageModel(random_bilm(), 20)
    groups = layer_groups(lm)
    assert [g.name for g in groups] == ["token_encoder", "lstm_1", "lstm_2", "softmax"]
    grouped = [id(p) for g in groups for p in g.params]
    assert sorted(grouped) == sorted(id(p) for p in lm.parameters())  # each param once
    assert discriminative_lrs(0.4, 4, 2.6) == pytest.approx([0.4 / 2.6**3, 0.4 / 2.6**2,
                                                             0.4 / 2.6, 0.4])
    assert discriminative_lrs(0.2, 4) == [0.2] * 4
    assert [trainable_groups(s, 4, 3) for s in (0, 2, 3, 6, 9, 100)] == [1, 1, 2, 3, 4, 4]
    assert trainable_groups(0, 4, None) == 4


def test_learning_rate_of_every_group_during_training(tmp_path):
    train, _ = write_corpus(tmp_path)
    config = tiny_config(train, max_steps=20, optimizer="adam", lr=0.01,
                         discriminative_lr=2.6, schedule="slanted-triangular", warmup_frac=0.2)
    trainer = Trainer(config, tmp_path / "run", progress=False)
    seen = []
    real_step = torch.optim.Adam.step

    def record(self, *args, **kwargs):
        seen.append([g["lr"] for g in self.param_groups])
        return real_step(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.optim.Adam, "step", record)
        trainer.run()
    assert [g["name"] for g in trainer.optimizer.param_groups] == [
        "token_encoder", "lstm_1", "lstm_2", "softmax"]
    for step, lrs in enumerate(seen):
        peak = 0.01 * slanted_triangular(step, 20, 0.2)
        assert lrs == pytest.approx([peak / 2.6**3, peak / 2.6**2, peak / 2.6, peak])
    assert len(seen) == 20 and seen[4][-1] == pytest.approx(0.01)


def test_gradual_unfreezing_leaves_frozen_groups_untouched(tmp_path):
    """Continue training with 4 groups, one more unfrozen every 2 steps, 4 steps: the token
    encoder and LSTM layer 1 never change, LSTM layer 2 and the softmax do."""
    train, _ = write_corpus(tmp_path)
    vocab = Vocabulary.build(line.split() for line in train.read_text().splitlines())
    source = trained_like_dir(tmp_path / "source", vocab)
    config = tiny_config(train, init_from=str(source), max_steps=4, checkpoint_every=100,
                         gradual_unfreeze=True, unfreeze_every=2)
    run(config, tmp_path / "run")
    before, after = load_file(source / "model.safetensors"), load_file(
        tmp_path / "run" / "model.safetensors")

    def changed(prefix: str) -> list[bool]:
        return [not torch.equal(before[k], after[k]) for k in before if k.startswith(prefix)]

    assert not any(changed("token_encoder.")) and not any(changed("lstm.layers.0."))
    assert all(changed("lstm.layers.1.")) and all(changed("softmax."))


# ---- data stream and checkpoints --------------------------------------------------------


def test_train_stream_resumes_exactly_across_epochs(tmp_path):
    train, _ = write_corpus(tmp_path, n_train=12, n_valid=1)
    vocab = Vocabulary.build(line.split() for line in train.read_text().splitlines())
    config = BPTTConfig(batch_size=3, unroll_steps=7, shuffle_window=4, seed=5)

    def stream() -> TrainStream:
        return TrainStream([train], "whitespace", vocab, config)

    reference = stream()
    batches = [next(reference) for _ in range(30)]  # 12 sentences ~ 8 batches per epoch
    assert reference.epoch >= 2
    for cut in (1, 8, 9, 17):
        first = stream()
        for _ in range(cut):
            next(first)
        resumed = stream()
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        for want in batches[cut:]:
            got = next(resumed)
            assert got.words_fwd == want.words_fwd and (got.mask == want.mask).all()
            assert (got.next_ids == want.next_ids).all() and (got.prev_ids == want.prev_ids).all()


@pytest.mark.parametrize("indexer", [ByteIndexer(50), VocabIndexer(
    ["<oov>", "<bow>", "<eow>", "<pad>", "<bos>", "<eos>", *"abcdefghijklmnopqrstuvwxyz."],
    [], 12)], ids=["bytes", "char-vocabulary"])
def test_batch_encoder_gives_each_word_its_char_ids_and_zeroes_the_padding(tmp_path, indexer):
    """The same ids as the indexer gives each word, in-vocabulary (from the encoder's table) or
    not (half the words here), the boundaries the indexer's own; padding all zero. Each
    distinct token has one row of char ids."""
    train, _ = write_corpus(tmp_path, n_train=3, n_valid=1)
    words = sorted({w for line in train.read_text().splitlines() for w in line.split()})
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", *words[::2]])
    batch = next(iter(TrainStream([train], "whitespace", vocab, BPTTConfig(4, 30))))
    boundary = {"<S>": indexer.bos_token, "</S>": indexer.eos_token}
    want = torch.stack([indexer.batch_to_ids([[boundary.get(w, w) for w in row] for row in rows])
                        for rows in (batch.words_fwd, batch.words_bwd)])
    encoder = BatchEncoder(vocab, indexer)
    for _ in range(2):  # filling the table, then from it
        tensors = encoder(batch)
        chars, targets, mask = tensors.tokens.chars, tensors.targets, tensors.mask
        assert len(torch.unique(chars, dim=0)) == len(chars)  # each distinct token once
        assert tensors.candidates is None and tensors.n_tokens == int(mask.sum())
        char_ids = chars[tensors.tokens.index]
        assert char_ids.shape == (2, 4, 30, indexer.width) and targets.shape == (2, 4, 30)
        assert not mask.all() and (char_ids[:, ~mask] == 0).all()
        assert torch.equal(char_ids[:, mask], want[:, mask])
    assert (char_ids[:, mask] > 0).any(dim=-1).all()
    assert char_ids[1, 0, 0].tolist() == list(indexer.token_ids(indexer.eos_token))


def test_checkpoint_round_trip(tmp_path):
    lm = BiLanguageModel(random_bilm(), 20)
    optimizer = torch.optim.Adam(lm.parameters(), lr=0.1)
    lm(torch.randint(1, 200, (2, 3, 4, 50)), torch.randint(0, 20, (2, 3, 4)),
       torch.ones(3, 4, dtype=torch.bool)).total.backward()
    optimizer.step()
    torch.manual_seed(7)
    rng = capture_rng()
    expected_draw = torch.rand(3)
    states = [(torch.randn(2, 3, 16), torch.randn(2, 3, 64)) for _ in range(2)]
    ckpt = Checkpoint(step=12, model=lm.state_dict(), optimizer=optimizer.state_dict(),
                      ranks=[RankState({"epoch": 1, "batcher": {"rows": [None]}}, states, rng)],
                      best_valid_ppl=12.5, bad_evals=1, model_config=lm.bilm.config.to_dict())
    path = tmp_path / CHECKPOINT_NAME
    ckpt.save(path)
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left
    loaded = Checkpoint.load(path)
    assert read_checkpoint_meta(path)["step"] == 12
    assert (loaded.step, loaded.best_valid_ppl, loaded.bad_evals, loaded.finished) == (
        12, 12.5, 1, False)
    assert all(torch.equal(loaded.model[k], v) for k, v in lm.state_dict().items())
    fresh = torch.optim.Adam(BiLanguageModel(random_bilm(), 20).parameters(), lr=0.1)
    fresh.load_state_dict(loaded.optimizer)
    for key, slots in optimizer.state_dict()["state"].items():
        for name, value in slots.items():
            assert torch.equal(fresh.state_dict()["state"][key][name], value)
    rank = loaded.ranks[0]
    assert rank.stream == {"epoch": 1, "batcher": {"rows": [None]}}
    assert all(torch.equal(a, b) for s, t in zip(rank.lstm_states, states, strict=True)
               for a, b in zip(s, t, strict=True))
    torch.manual_seed(0)
    restore_rng(rank.rng)
    assert torch.equal(torch.rand(3), expected_draw)


def test_not_a_checkpoint(tmp_path):
    path = tmp_path / "x.safetensors"
    path.write_bytes(b"garbage")
    with pytest.raises(ElmoError, match="not a readable checkpoint of an elmo run"):
        read_checkpoint_meta(path)


# ---- the trainer ------------------------------------------------------------------------


def test_nan_loss_stops_the_run_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    train, _ = write_corpus(tmp_path)
    out = tmp_path / "run"
    config = tiny_config(train, max_steps=12, checkpoint_every=5)
    real_forward, calls = BiLanguageModel.forward, []

    def poisoned(self, *args):
        losses = real_forward(self, *args)
        calls.append(1)
        if len(calls) == 8:  # step 8
            return LMLosses(losses.forward * float("nan"), losses.backward)
        return losses

    monkeypatch.setattr(BiLanguageModel, "forward", poisoned)
    # Found when steps 6-10 are read back from the device (log and checkpoint of step 10),
    # before anything of step 10 is written.
    with pytest.raises(TrainingDiverged, match=r"step 8: forward loss nan.*steps 6-10 were "
                       r"read back.*checkpoint of step 5 .* is intact"):
        run(config, out)
    assert [json.loads(line)["step"] for line in
            (out / "metrics.jsonl").read_text().splitlines()] == [5]
    ckpt = Checkpoint.load(out / CHECKPOINT_NAME)
    assert ckpt.step == 5 and not ckpt.finished
    assert all(torch.isfinite(t).all() for t in ckpt.model.values())
    model = load_file(out / "model.safetensors")  # the model of the same step
    assert all(torch.equal(model[k], ckpt.model[f"bilm.{k}"]) for k in model
               if not k.startswith("softmax."))

    monkeypatch.setattr(BiLanguageModel, "forward", real_forward)
    result = run(config, out)  # the same command resumes from step 5
    assert result.step == 12 and Checkpoint.load(out / CHECKPOINT_NAME).finished


def test_early_stopping(tmp_path, monkeypatch):
    train, valid = write_corpus(tmp_path)
    losses = iter([2.0, 2.5, 3.0, 3.5, 4.0])  # mean loss of each evaluation: worse and worse

    def fake_evaluate(lm, sentences, vocab, batch_size):
        loss = next(losses)
        return PerplexityTotals(10 * loss, 10 * loss, 10)

    monkeypatch.setattr(trainer_module, "evaluate_perplexity", fake_evaluate)
    config = tiny_config(train, valid, max_steps=40, eval_every=2, checkpoint_every=100,
                         early_stopping_patience=2)
    result = run(config, tmp_path / "run")
    assert result.stopped_early and result.step == 6
    ckpt = Checkpoint.load(tmp_path / "run" / CHECKPOINT_NAME)
    assert ckpt.finished and ckpt.step == 6 and ckpt.bad_evals == 2
    assert ckpt.best_valid_ppl == pytest.approx(math.exp(2.0))
    assert run(config, tmp_path / "run").step == 6  # finished: nothing more to do


def test_time_budget_stops_cleanly_and_a_resumed_run_counts_only_its_own_time(
    tmp_path, monkeypatch
):
    train, valid = write_corpus(tmp_path)
    clock = {"now": 1000.0}

    def fake_now():  # every reading of the budget clock is one minute later
        clock["now"] += 60.0
        return clock["now"]

    monkeypatch.setattr(clock_module, "_now", fake_now)
    out = tmp_path / "run"
    config = tiny_config(train, valid, max_steps=20, max_minutes=2.5, checkpoint_every=100,
                         eval_every=100, log_every=100)
    result = run(config, out)  # steps end 1, 2 and 3 minutes after the first began
    assert result.stopped_for_time and not result.stopped_early and result.step == 3
    assert result.last_valid is not None  # validated at the stop, like at the end
    ckpt = Checkpoint.load(out / CHECKPOINT_NAME)
    assert ckpt.step == 3 and not ckpt.finished
    assert (out / "model.safetensors").exists()
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [3, 3]  # one training record and one validation record

    clock["now"] += 1e6  # much later: the resumed run's budget starts at its own first step
    result = run(config, out)
    assert result.stopped_for_time and result.step == 6
    assert Checkpoint.load(out / CHECKPOINT_NAME).step == 6
    with pytest.raises(ValueError, match="max minutes"):
        tiny_config(train, max_minutes=0)


def test_checkpoint_minutes_checkpoints_by_time_and_a_resumed_run_ends_identical(
    tmp_path, monkeypatch
):
    train, valid = write_corpus(tmp_path)
    clock = {"now": 0.0}

    def fake_now():  # every reading of the clock is one minute later
        clock["now"] += 60.0
        return clock["now"]

    saved, real_save = [], Checkpoint.save

    def save(ckpt, path):
        saved.append(ckpt.step)
        real_save(ckpt, path)

    monkeypatch.setattr(clock_module, "_now", fake_now)
    monkeypatch.setattr(Checkpoint, "save", save)
    config = tiny_config(train, valid, max_steps=10, checkpoint_every=1000, eval_every=5,
                         log_every=4, checkpoint_minutes=2.5, softmax="sampled", num_samples=12)
    run(config, tmp_path / "reference")
    assert saved == [3, 6, 9, 10]  # 3 minutes after the first step, the last save, ...; end

    saved.clear()
    real_step, steps = Trainer._train_step, []

    def crash_at_step_8(self, batch):
        steps.append(self.step)
        if len(steps) == 8:
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "_train_step", crash_at_step_8)
    with pytest.raises(KeyboardInterrupt):
        run(config, tmp_path / "crashed")
    assert saved == [3, 6]
    monkeypatch.setattr(Trainer, "_train_step", real_step)
    run(config, tmp_path / "crashed")  # resumes from step 6, between two metrics lines
    assert saved == [3, 6, 9, 10]
    assert_identical(run_files(tmp_path / "crashed"), run_files(tmp_path / "reference"))
    with pytest.raises(ValueError, match="checkpoint minutes"):
        tiny_config(train, checkpoint_minutes=0)


def test_options_are_checked():
    with pytest.raises(ValueError, match="not both"):
        TrainConfig(train=["x"], preset="tiny", init_from="small")
    with pytest.raises(ValueError, match="early stopping needs validation"):
        TrainConfig(train=["x"], early_stopping_patience=2)
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(train=["x"], optimizer="sgd")
    assert TrainConfig(train=["x"]).learning_rate == 0.2
    assert TrainConfig(train=["x"], optimizer="adam").learning_rate == 1e-3


# ---- continued training -----------------------------------------------------------------


def test_continue_from_official_files_initialises_the_softmax_from_token_vectors(tmp_path):
    source = random_bilm(seed=4)
    save_bilm_tf(source, tmp_path / "official")
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "the", "river", "bank"])
    lm = build_language_model(tiny_config(tmp_path / "x", init_from=str(tmp_path / "official"),
                                          dropout=0.2), vocab)
    assert lm.bilm.config.dropout == 0.2 and lm.bilm.config.vocab_size == 6
    for name, tensor in source.state_dict().items():
        torch.testing.assert_close(lm.bilm.state_dict()[name], tensor)
    ids = torch.tensor([word_to_char_ids(w) for w in vocab])
    with torch.no_grad():
        vectors = source.token_encoder(ids)
    # the token vectors' directions at bilm-tf's initial scale (unit rows), bias 0
    torch.testing.assert_close(lm.softmax.weight, vectors / vectors.norm(dim=1, keepdim=True))
    assert torch.equal(lm.softmax.bias, torch.zeros(6))


def test_continue_from_our_model_keeps_softmax_rows_of_known_words(tmp_path):
    old_vocab = Vocabulary(["<S>", "</S>", "<UNK>", "the", "bank", "money"])
    source = trained_like_dir(tmp_path / "ours", old_vocab)
    old = load_file(source / "model.safetensors")
    new_vocab = Vocabulary(["<S>", "</S>", "<UNK>", "river", "bank", "the"])
    lm = build_language_model(tiny_config(tmp_path / "x", init_from=str(source)), new_vocab)
    for new_id, word in enumerate(new_vocab):
        if word in old_vocab:
            old_id = old_vocab.word_to_id(word)
            assert torch.equal(lm.softmax.weight[new_id], old["softmax.weight"][old_id])
            assert lm.softmax.bias[new_id] == old["softmax.bias"][old_id]
    # a new word: its token vector's direction, at the copied rows' mean norm and bias
    known = [old_vocab.word_to_id(w) for w in new_vocab if w in old_vocab]
    mean_norm = old["softmax.weight"][known].norm(dim=1).mean()
    river = torch.tensor([word_to_char_ids("river")])
    with torch.no_grad():
        vector = lm.bilm.token_encoder(river)[0]
    torch.testing.assert_close(lm.softmax.weight[3], vector / vector.norm() * mean_norm)
    torch.testing.assert_close(lm.softmax.bias[3], old["softmax.bias"][known].mean())


def test_metrics_after_the_checkpoint_are_dropped_on_resume(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", "step")
    for step in (5, 10, 15):
        log.append({"step": step, "train_loss": 1.0})
    with open(log.path, "a") as f:
        f.write('{"step": 20, "trai')  # cut short by SIGKILL
    log.truncate_after(10)
    assert [json.loads(line)["step"] for line in log.path.read_text().splitlines()] == [5, 10]


def test_throughput_leaves_out_paused_time(monkeypatch):
    from elmo.training import window as window_module

    clock = iter([0.0, 10.0, 40.0, 50.0])  # window start, pause start, pause end, summary
    monkeypatch.setattr(window_module.time, "perf_counter", lambda: next(clock))
    window = window_module.LogWindow(StepStats(torch.device("cpu")), main=True)
    window.add(1000)
    with window.paused():  # e.g. a validation
        pass
    window.reading = StatsReading(1.0, 1.0, 1000)  # as read back from the device
    assert window.summary()[2] == pytest.approx(1000 / 20)
