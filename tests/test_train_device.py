"""`elmo train`'s options for a GPU run, tested on the CPU (issue 45): --precision, the
optimizer's implementation and its state on another device, batches prepared ahead by a
thread, checkpoints that move between devices, --weights-copy. Tests that need CUDA skip
without it."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import torch

from elmo.chars import ByteIndexer
from elmo.cli import main
from elmo.data.batching import BPTTConfig
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_directory
from elmo.loading.load import load_model
from elmo.modules.bilm import BiLM
from elmo.modules.softmax import SoftmaxHead
from elmo.runs import CHECKPOINT_NAME, capture_rng, restore_rng
from elmo.training import trainer as trainer_module
from elmo.training.checkpoint import Checkpoint
from elmo.training.optimizer import (
    DeviceAdagrad,
    build_optimizer,
    implementation,
    load_optimizer_state,
)
from elmo.training.stream import (
    BatchEncoder,
    CandidateSampler,
    PreparedBatches,
    TrainStream,
)
from elmo.training.trainer import Trainer
from elmo.vocab import Vocabulary
from tests.helpers.training import (
    assert_identical,
    run,
    run_files,
    tiny_config,
    train_args,
    write_corpus,
)

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


def _crash_at_step(monkeypatch, step: int) -> None:
    """The next run raises KeyboardInterrupt as its `step`-th step begins."""
    real_step, steps = Trainer._train_step, []

    def crashing(self, batch):
        steps.append(self.step)
        if len(steps) == step:
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "_train_step", crashing)


# ---- precision --------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_bf16_autocasts_the_bilm_and_keeps_the_softmax_in_fp32(tmp_path, monkeypatch, precision):
    train, _ = write_corpus(tmp_path)
    lstm_seen, softmax_seen = [], []
    real_lstm, real_loss = BiLM.run_lstm, SoftmaxHead.full_loss

    def lstm_spy(self, x, lengths):
        outputs = real_lstm(self, x, lengths)
        lstm_seen.append((torch.is_autocast_enabled("cpu"), outputs[-1].dtype))
        return outputs

    def loss_spy(self, hidden, targets, chunk_size=None):
        softmax_seen.append((torch.is_autocast_enabled("cpu"), hidden.dtype))
        nll = real_loss(self, hidden, targets, chunk_size)
        assert nll.dtype == torch.float32
        return nll

    monkeypatch.setattr(BiLM, "run_lstm", lstm_spy)
    monkeypatch.setattr(SoftmaxHead, "full_loss", loss_spy)
    result = run(tiny_config(train, max_steps=4, softmax="full", precision=precision),
                 tmp_path / "run")
    assert result.step == 4
    low = precision == "bf16"
    assert lstm_seen == [(low, torch.bfloat16 if low else torch.float32)] * 4
    assert softmax_seen == [(False, torch.float32)] * 4
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["config"]["precision"]
    assert recorded == precision
    assert all(t.dtype == torch.float32 for t in Checkpoint.load(
        tmp_path / "run" / CHECKPOINT_NAME).model.values())


def test_tf32_is_fp32_on_the_cpu_said_once_and_set_for_the_training_steps_only(
    tmp_path, monkeypatch, capsys
):
    train, valid = write_corpus(tmp_path)
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn

    def tf32() -> tuple[str, str, str]:  # CUDA matmuls, cuDNN convolutions and LSTMs
        return matmul.fp32_precision, cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision

    before, seen = tf32(), {"step": [], "eval": []}
    real_step, real_eval = Trainer._train_step, trainer_module.evaluate_perplexity

    def step_spy(self, batch):
        seen["step"].append(tf32())
        return real_step(self, batch)

    def eval_spy(*args, **kwargs):
        seen["eval"].append(tf32())
        return real_eval(*args, **kwargs)

    monkeypatch.setattr(Trainer, "_train_step", step_spy)
    monkeypatch.setattr(trainer_module, "evaluate_perplexity", eval_spy)
    options = dict(max_steps=4, eval_every=2, softmax="sampled", num_samples=12)
    Trainer(tiny_config(train, valid, precision="tf32", **options), tmp_path / "tf32").run()
    assert seen == {"step": [("tf32",) * 3] * 4, "eval": [("ieee",) * 3] * 2}
    assert tf32() == before
    err = capsys.readouterr().err
    assert err.count("--precision tf32 has no effect on cpu: the run computes in fp32") == 1
    seen["step"].clear()
    run(tiny_config(train, valid, precision="fp32", **options), tmp_path / "fp32")
    assert seen["step"] == [("ieee",) * 3] * 4
    assert_identical(run_files(tmp_path / "tf32"), run_files(tmp_path / "fp32"))


def test_precision_may_change_when_a_run_is_resumed(tmp_path, capsys):
    train, _ = write_corpus(tmp_path)
    out = tmp_path / "run"
    run(tiny_config(train, max_steps=3, precision="bf16"), out)
    capsys.readouterr()
    Trainer(tiny_config(train, max_steps=6, precision="fp32"), out).run()
    assert "resuming with changed options: max_steps, precision" in capsys.readouterr().err
    assert Checkpoint.load(out / CHECKPOINT_NAME).step == 6
    assert json.loads((out / "run.json").read_text())["config"]["precision"] == "fp32"
    with pytest.raises(ValueError, match="precision must be one of"):
        tiny_config(train, precision="fp16")


# ---- the optimizer ----------------------------------------------------------------------


def test_the_optimizer_is_fused_on_cuda_where_torch_has_the_kernel(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert implementation("adagrad", cpu) == implementation("adam", cpu) == {}
    monkeypatch.setattr(torch._C, "_dispatch_has_kernel_for_dispatch_key",
                        lambda op, key: (op, key) == ("aten::_fused_adam_", "CUDA"))
    assert implementation("adam", cuda) == {"fused": True}
    assert implementation("adagrad", cuda) == {"foreach": True}  # torch 2.11: CPU-only fused


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["adagrad", "adam"])
def test_optimizer_state_of_another_implementation_resumes_in_this_ones(tmp_path, name, device):
    """A state written by a fused optimizer (as on CUDA), through a checkpoint file, loads
    into this device's optimizer: its own implementation, the state equal and on the
    parameters' device."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(3))]
    groups = [{"params": [p], "lr": 0.1} for p in params]
    written = build_optimizer(name, groups, 0.1, torch.device("cpu"))
    for group in written.param_groups:
        group["fused"] = True
    for _ in range(2):
        for p in params:
            p.grad = torch.randn_like(p)
        written.step()
    Checkpoint(step=2, model={}, optimizer=written.state_dict(), ranks=[]).save(
        tmp_path / CHECKPOINT_NAME)
    saved = Checkpoint.load(tmp_path / CHECKPOINT_NAME).optimizer

    here = torch.device(device)
    mine = [torch.nn.Parameter(p.detach().to(here)) for p in params]
    optimizer = build_optimizer(name, [{"params": [p], "lr": 0.1} for p in mine], 0.1, here)
    flags = {k: optimizer.param_groups[0][k] for k in ("fused", "foreach")}
    load_optimizer_state(optimizer, saved)
    assert all({k: g[k] for k in flags} == flags for g in optimizer.param_groups)
    for p, original in zip(mine, params, strict=True):
        for key, value in optimizer.state[p].items():
            want = written.state[original][key]
            assert torch.equal(value.cpu().float(), want.float()), key
            if key != "step" or flags["fused"]:
                assert value.device == p.device, key
    for p in mine:
        p.grad = torch.ones_like(p)
    optimizer.step()


def test_device_adagrad_is_torchs_adagrad_with_a_tensor_lr_and_interchangeable_state():
    """The capturable Adagrad a CUDA graph replays: bit for bit torch's Adagrad (foreach and
    the default loop), with a float or a tensor learning rate; steps counted on the device;
    its state dict loads into torch's Adagrad and back, without its own flag."""
    torch.manual_seed(0)
    start = [torch.randn(5, 3), torch.randn(3)]
    grads = [[torch.randn_like(p) for p in start] for _ in range(4)]

    def train(make) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
        params = [torch.nn.Parameter(p.clone()) for p in start]
        optimizer = make(params)
        for step_grads in grads:
            for p, g in zip(params, step_grads, strict=True):
                p.grad = g.clone()
            optimizer.step()
        return [p.detach() for p in params], optimizer

    kwargs = dict(initial_accumulator_value=1.0)
    want, torchs = train(lambda ps: torch.optim.Adagrad(ps, lr=0.2, foreach=True, **kwargs))
    assert all(torch.equal(a, b) for a, b in zip(
        train(lambda ps: torch.optim.Adagrad(ps, lr=0.2, **kwargs))[0], want, strict=True))
    for lr in (0.2, torch.tensor(0.2)):
        got, mine = train(lambda ps, lr=lr: DeviceAdagrad(ps, lr=lr, **kwargs))
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert all(state["step"].item() == 4 for state in mine.state.values())

    back = torch.optim.Adagrad([torch.nn.Parameter(p.clone()) for p in start], lr=0.2)
    load_optimizer_state(back, mine.state_dict())
    assert "capturable" not in back.param_groups[0]
    again = DeviceAdagrad([torch.nn.Parameter(p.clone()) for p in start], lr=0.2)
    load_optimizer_state(again, torchs.state_dict())
    assert again.param_groups[0]["capturable"]
    for a, b in zip(again.state.values(), torchs.state.values(), strict=True):
        assert torch.equal(a["sum"], b["sum"]) and a["step"].item() == b["step"].item()


def test_a_capturable_optimizer_is_built_for_graphs_only_where_asked():
    def groups() -> list[dict]:
        return [{"params": [torch.nn.Parameter(torch.zeros(2))]}]

    cpu = torch.device("cpu")
    assert type(build_optimizer("adagrad", groups(), 0.2, cpu)) is torch.optim.Adagrad
    assert isinstance(build_optimizer("adagrad", groups(), 0.2, cpu, capturable=True),
                      DeviceAdagrad)
    assert not build_optimizer("adam", groups(), 0.1, cpu).param_groups[0]["capturable"]


# ---- checkpoints across devices ---------------------------------------------------------


@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_a_checkpoint_written_on_a_gpu_resumes_on_the_cpu_exactly(tmp_path, monkeypatch,
                                                                    optimizer):
    """A checkpoint as a CUDA run writes it (CUDA RNG states, a fused optimizer's groups)
    resumes on a machine without CUDA and ends bit-identical to a run never interrupted."""
    train, valid = write_corpus(tmp_path)
    config = tiny_config(train, valid, max_steps=8, checkpoint_every=4, eval_every=4,
                         log_every=3, softmax="sampled", num_samples=12, optimizer=optimizer)
    run(config, tmp_path / "reference")
    crashed = tmp_path / "crashed"
    with monkeypatch.context() as patch:
        _crash_at_step(patch, 6)
        with pytest.raises(KeyboardInterrupt):
            run(config, crashed)
    ckpt = Checkpoint.load(crashed / CHECKPOINT_NAME)
    assert ckpt.step == 4
    for rank in ckpt.ranks:
        rank.rng["cuda"] = [torch.zeros(16, dtype=torch.uint8)]  # one GPU's generator
    for group in ckpt.optimizer["param_groups"]:
        group.update(fused=True, foreach=False)
    ckpt.save(crashed / CHECKPOINT_NAME)
    run(config, crashed)
    assert_identical(run_files(crashed), run_files(tmp_path / "reference"))


@pytest.mark.parametrize("gpus", [0, 1, 2])
def test_cuda_generators_are_restored_only_for_the_gpus_this_process_has(monkeypatch, gpus):
    """Saved by a process with two GPUs; restored by one with `gpus`."""
    state = capture_rng()
    state["cuda"] = [torch.full((16,), k, dtype=torch.uint8) for k in range(2)]
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_rng_state",
                        lambda new_state, device: restored.append((int(new_state[0]), device)))
    restore_rng(state)
    assert restored == [(k, k) for k in range(gpus)]


@CUDA
def test_a_run_moves_from_the_gpu_to_the_cpu_and_back_exactly(tmp_path, monkeypatch):
    """fp32: each resumed run starts from exactly the weights and optimizer state of the
    checkpoint the other device wrote, on its own device."""
    train, _ = write_corpus(tmp_path)
    out, starts = tmp_path / "run", []
    real_step = Trainer._train_step

    def check_first_step(self, batch):
        if not starts or starts[-1][0] != self.config.device:
            ckpt = Checkpoint.load(out / CHECKPOINT_NAME)
            state = self.lm.state_dict()
            assert all(torch.equal(state[k].cpu(), v) for k, v in ckpt.model.items())
            for group in self.optimizer.param_groups:
                for p in group["params"]:
                    for key, value in self.optimizer.state[p].items():
                        assert value.device == p.device or key == "step"
            starts.append((self.config.device, self.step))
        return real_step(self, batch)

    options = dict(precision="fp32", optimizer="adam", checkpoint_every=3)
    run(tiny_config(train, max_steps=3, device="cuda", **options), out)
    monkeypatch.setattr(Trainer, "_train_step", check_first_step)
    for device, steps in (("cpu", 6), ("cuda", 9)):
        run(tiny_config(train, max_steps=steps, device=device, **options), out)
    assert starts == [("cpu", 3), ("cuda", 6)]
    assert Checkpoint.load(out / CHECKPOINT_NAME).step == 9


# ---- batches prepared ahead -------------------------------------------------------------


def test_prepared_batches_give_the_position_of_the_last_batch_returned(tmp_path):
    train, _ = write_corpus(tmp_path, n_train=12, n_valid=1)
    vocab = Vocabulary.build(line.split() for line in train.read_text().splitlines())
    sampler = CandidateSampler(len(vocab), 5, seed=3)
    encoder = BatchEncoder(vocab, ByteIndexer(50), sampler=sampler)

    def stream(path=train) -> TrainStream:
        return TrainStream([path], "whitespace", vocab, BPTTConfig(3, 7, shuffle_window=4))

    ahead, plain = PreparedBatches(stream(), encoder, ahead=4), stream()
    draws = []
    for step in range(10):  # over two epochs
        got, want = next(ahead), next(plain)
        assert torch.equal(got.targets, torch.from_numpy(np.stack([want.next_ids,
                                                                   want.prev_ids])))
        assert ahead.state_dict() == plain.state_dict() and ahead.step == step + 1
        assert torch.equal(got.candidates.ids, sampler(got.targets, step).ids)  # its step's
        draws.append(tuple(got.candidates.ids.tolist()))
    assert len(set(draws)) > 1
    deadline = time.monotonic() + 60
    while not ahead._queue.full():  # the thread reads 4 batches ahead
        assert time.monotonic() < deadline
        time.sleep(0.01)
    ahead.close()
    assert not ahead._thread.is_alive()
    assert ahead.stream.state_dict() != ahead.state_dict() == plain.state_dict()

    resumed = PreparedBatches(stream(), encoder, ahead=2)
    resumed.load_state_dict(json.loads(json.dumps(ahead.state_dict())), step=10)
    got, want = next(resumed), encoder(next(plain), 10)
    assert torch.equal(got.tokens.chars, want.tokens.chars)
    assert torch.equal(got.candidates.ids, want.candidates.ids)
    resumed.close()

    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n")
    failing = PreparedBatches(stream(blank), encoder, ahead=2)
    for _ in range(2):  # raised in the thread, then again
        with pytest.raises(ElmoError, match="no training sentences"):
            next(failing)
    failing.close()


def test_prefetching_resumes_exactly_and_equals_a_run_without_it(tmp_path, monkeypatch):
    train, valid = write_corpus(tmp_path)
    options = dict(max_steps=10, checkpoint_every=3, eval_every=5, log_every=4,
                   softmax="sampled", num_samples=12)
    run(tiny_config(train, valid, **options), tmp_path / "reference")  # CPU default: none
    config = tiny_config(train, valid, prefetch=3, **options)
    with monkeypatch.context() as patch:
        _crash_at_step(patch, 8)
        with pytest.raises(KeyboardInterrupt):
            run(config, tmp_path / "crashed")
    assert Checkpoint.load(tmp_path / "crashed" / CHECKPOINT_NAME).step == 6
    assert "elmo-train-batches" not in {t.name for t in threading.enumerate()}
    run(config, tmp_path / "crashed")
    assert_identical(run_files(tmp_path / "crashed"), run_files(tmp_path / "reference"))
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        tiny_config(train, prefetch=-1)


# ---- the weights copy -------------------------------------------------------------------


def test_weights_copy_is_the_model_in_small_fp16_shards_that_load_as_a_model(tmp_path, capsys):
    train, valid = write_corpus(tmp_path)
    out, copy = tmp_path / "run", tmp_path / "device-out" / "weights"
    limit_mib = 0.02  # 20,971 bytes; the largest fp16 tensor of `tiny` has 16,384
    assert main(train_args(train, valid, out, "--max-steps", "6", "--eval-every", "3",
                           "--checkpoint-every", "3", "--weights-copy", copy,
                           "--weights-copy-shard-mib", str(limit_mib))) == 0
    names = sorted(p.name for p in copy.iterdir())
    shards = [n for n in names if n.startswith("model-")]
    assert names == sorted(["config.json", "vocab.txt", "run.json", "progress.json",
                            "model.safetensors.index.json", *shards])
    assert len(shards) >= 3 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    assert all((copy / n).stat().st_size <= limit_mib * 2**20 for n in shards)
    assert sorted(p.name for p in copy.parent.iterdir()) == ["weights"]  # no .new, .old
    assert (copy / "vocab.txt").read_text() == (out / "vocab.txt").read_text()

    copied, model = load_model(copy), load_model(out)
    assert copied.tokenizer == "whitespace" and copied.extra.keys() == model.extra.keys()
    tensors = {**model.bilm.state_dict(), **model.extra}
    for name, value in {**copied.bilm.state_dict(), **copied.extra}.items():
        assert torch.equal(value, tensors[name].half().float()), name  # fp16, rounded once
    ids = copied.bilm.batch_to_ids([["the", "cat", "sees", "a", "ball", "."]])
    with torch.no_grad():
        torch.testing.assert_close(copied.bilm(ids).layers, model.bilm(ids).layers,
                                   atol=1e-2, rtol=1e-2)

    capsys.readouterr()
    assert main(["perplexity", str(copy), str(valid)]) == 0
    from_copy = capsys.readouterr().out
    assert main(["perplexity", str(out), str(valid)]) == 0
    ppl = [float(line.split()[-1]) for text in (from_copy, capsys.readouterr().out)
           for line in text.splitlines() if line.startswith("average perplexity")]
    assert len(ppl) == 2 and ppl[0] == pytest.approx(ppl[1], rel=1e-2)
    assert main(["train", "--train", str(train), "--out", str(tmp_path / "continued"),
                 "--init-from", str(copy), "--max-steps", "2", "--batch-size", "8",
                 "--quiet"]) == 0


def test_weights_copy_refuses_a_directory_it_would_destroy(tmp_path, capsys):
    train, _ = write_corpus(tmp_path)
    out = tmp_path / "runs" / "run"
    foreign = tmp_path / "papers"
    foreign.mkdir()
    (foreign / "draft.txt").write_text("keep me\n")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x\n")
    cases = [(out, "would replace the run directory"),
             (tmp_path / "runs", "would replace the run directory"),
             (a_file, "is a file"),
             (foreign, "holds files but no weights copy")]
    for copy, message in cases:
        capsys.readouterr()
        assert main(train_args(train, None, out, "--max-steps", "1", "--weights-copy",
                               copy)) == 1
        assert message in capsys.readouterr().err
        assert not out.exists()
    assert (foreign / "draft.txt").read_text() == "keep me\n"


def test_a_directory_written_whole_replaces_the_old_one_or_nothing(tmp_path):
    target = tmp_path / "copy"
    with atomic_directory(target) as new:
        (new / "a").write_text("1")
    (tmp_path / ".copy.new").mkdir()  # left by a writer killed while writing
    (tmp_path / ".copy.new" / "half").write_text("")
    with pytest.raises(RuntimeError), atomic_directory(target) as new:
        (new / "b").write_text("2")
        raise RuntimeError("failed while writing")
    assert [p.name for p in target.iterdir()] == ["a"]
    with atomic_directory(target) as new:
        (new / "c").write_text("3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]
    assert [p.name for p in target.iterdir()] == ["c"]
