"""The training step that reads nothing back from the device (`elmo.training.step`): equal
to the step as it was written before (host reads, dynamic shapes), on the CPU; its static
buffers (what a CUDA graph replays) equal the plain step; the graphed step equals the eager
one on CUDA (skipped without it); an unclipped model trains through the cudnn back end and
loads everywhere a clipped one does."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_

from elmo.chars import ByteIndexer
from elmo.cli import main
from elmo.config import BiLMConfig
from elmo.data.batching import BPTTConfig
from elmo.device import PRECISIONS, tf32_allowed
from elmo.loading.load import load_model
from elmo.modules.bilm import BiLM
from elmo.modules.language_model import BiLanguageModel, LMLosses
from elmo.modules.lstm_backends import CuDNNBackend
from elmo.training.config import TrainConfig
from elmo.training.distributed import World
from elmo.training.optimizer import build_optimizer
from elmo.training.step import GraphedStep, StepStats, TrainStep
from elmo.training.stream import BatchEncoder, CandidateSampler, TrainStream
from elmo.training.trainer import Trainer
from elmo.vocab import Vocabulary
from tests.helpers.training import tiny_config, train_args, write_corpus

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
ROWS, UNROLL, SAMPLES, CLIP = 8, 10, 12, 1.0


def _setup(tmp_path, n_train: int = 40, clip: bool = True, dropout: float = 0.1):
    """A tiny language model, its vocabulary, and the encoded batches of a small corpus
    (n_train sentences: an epoch ends every few steps, so some batches have padding)."""
    train, _ = write_corpus(tmp_path, n_train=n_train, n_valid=1)
    vocab = Vocabulary.build(line.split() for line in train.read_text().splitlines())
    unclipped = {} if clip else {"cell_clip": None, "proj_clip": None}
    config = BiLMConfig.preset("tiny", vocab_size=len(vocab), dropout=dropout, **unclipped)

    def model() -> BiLanguageModel:
        torch.manual_seed(0)
        lm = BiLanguageModel(BiLM(config), len(vocab), "sampled", SAMPLES).train()
        lm.bilm.stateful = True
        return lm

    stream = TrainStream([train], "whitespace", vocab, BPTTConfig(ROWS, UNROLL))
    encode = BatchEncoder(vocab, ByteIndexer(50),
                          sampler=CandidateSampler(len(vocab), SAMPLES, seed=5))
    batches = [next(stream) for _ in range(20)]
    return model, [(batch, encode(batch, step)) for step, batch in enumerate(batches)]


def _reference_step(lm, optimizer, batch, tensors) -> tuple[float, float]:
    """The step as the trainer took it before: char ids of every position through
    `torch.unique`, the real positions picked with a boolean mask, the accidental hits found
    with `nonzero`, losses and gradient norm read back and checked before the update."""
    char_ids = tensors.tokens.chars[tensors.tokens.index]  # (2, B, T, C)
    mask = torch.from_numpy(batch.mask)
    top = lm.bilm.run_lstm(lm.bilm.encode_tokens(char_ids), mask.sum(dim=1))[-1]
    top = F.dropout(top, lm.bilm.config.dropout, True)
    hidden, targets = top[:, mask], tensors.targets[:, mask]  # (2, N, P), (2, N)
    cands = tensors.candidates
    target_log_q = cands.target_log_q[:, mask].float()
    weight, bias = lm.softmax.weight, lm.softmax.bias
    nll = []
    for d in range(2):
        true = (hidden[d] * weight[targets[d]]).sum(-1) + bias[targets[d]] - target_log_q[d]
        logits = hidden[d] @ weight[cands.ids].t() + bias[cands.ids] - cands.log_q.float()
        rows, cols = (targets[d].unsqueeze(1) == cands.ids.unsqueeze(0)).nonzero(as_tuple=True)
        logits = logits.index_put((rows, cols), torch.tensor(float("-inf")))
        logits = torch.cat([true.unsqueeze(1), logits], dim=1)
        nll.append(F.cross_entropy(logits, torch.zeros(len(true), dtype=torch.long)))
    losses = LMLosses(*nll)
    optimizer.zero_grad(set_to_none=True)
    (losses.total * UNROLL).backward()
    params = [p for p in lm.parameters() if p.grad is not None]
    norm = clip_grad_norm_(params, CLIP)
    loss_f, loss_b, norm = torch.stack([losses.forward, losses.backward, norm]).tolist()
    assert all(torch.isfinite(torch.tensor([loss_f, loss_b, norm])))
    optimizer.step()
    return loss_f, loss_b


@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_the_sync_free_step_equals_the_step_with_host_reads(tmp_path, optimizer):
    """20 steps, sampled softmax, dropout, carried states, batches with padding: the same
    losses step by step and the same weights at the end (fp32, 1e-6)."""
    model, batches = _setup(tmp_path)
    assert any(tensors.mask is not None for _, tensors in batches)  # an epoch's end
    reference, lm = model(), model()
    lr = 0.2 if optimizer == "adagrad" else 0.01
    ref_opt = build_optimizer(optimizer, [{"params": list(reference.parameters())}], lr,
                              torch.device("cpu"))
    opt = build_optimizer(optimizer, [{"params": list(lm.parameters())}], lr,
                          torch.device("cpu"))
    stats = StepStats(torch.device("cpu"))
    step = TrainStep(lm, opt, World(), stats, CLIP, UNROLL, PRECISIONS["fp32"])
    want = torch.zeros(2, dtype=torch.float64)
    for k, (batch, tensors) in enumerate(batches):
        torch.manual_seed(100 + k)  # the same dropout masks in both
        want += torch.tensor(_reference_step(reference, ref_opt, batch, tensors))
        torch.manual_seed(100 + k)
        step(tensors)
        reading = stats.read(World(), 0)
        got = torch.tensor([reading.sum_forward, reading.sum_backward], dtype=torch.float64)
        torch.testing.assert_close(got, want, atol=1e-6 * (k + 1), rtol=0)
    assert int(stats.steps) == 20 and reading.bad_step is None
    for (name, a), b in zip(lm.state_dict().items(), reference.state_dict().values(),
                            strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0, msg=name)


def test_a_non_finite_loss_is_kept_with_its_step_and_values(tmp_path):
    model, batches = _setup(tmp_path)
    lm = model()
    stats = StepStats(torch.device("cpu"), step=30)
    opt = build_optimizer("adagrad", [{"params": list(lm.parameters())}], 0.2,
                          torch.device("cpu"))
    step = TrainStep(lm, opt, World(), stats, CLIP, UNROLL, PRECISIONS["fp32"])
    step(batches[0][1])
    with torch.no_grad():
        lm.softmax.bias[0] = float("inf")
    for _, tensors in batches[1:4]:
        step(tensors)
    reading = stats.read(World(), 0)
    assert reading.bad_step == 32 and int(stats.steps) == 34
    assert not all(map(torch.isfinite, map(torch.tensor, reading.bad_values)))


class Recorded:
    """A stand-in for `CUDAGraphs` on the CPU: a capture records the work without running it
    (as CUDA does) and its replay runs it."""

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.warm_ups, self.captures = fail, 0, 0

    def warm_up(self, work) -> None:
        self.warm_ups += 1
        work()

    def capture(self, work):
        self.captures += 1
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        return work


@pytest.mark.parametrize("fail", [False, True], ids=["captured", "capture-fails"])
def test_the_graphed_step_replays_its_static_buffers_as_the_plain_step_runs(
    tmp_path, fail, caplog
):
    """GraphedStep's bookkeeping, run on the CPU: one eager step for each new shape, a
    capture of the step over static buffers with room for more distinct tokens, replays
    with the batch copied in and the carried states passed on, the batches with padding
    eager in between; or, when the capture fails, every step eager, said once. The same
    losses and weights as the plain step."""
    model, batches = _setup(tmp_path)
    results = []
    for graphed in (False, True):
        lm = model()
        opt = build_optimizer("adam", [{"params": list(lm.parameters())}], 0.01,
                              torch.device("cpu"))
        stats = StepStats(torch.device("cpu"))
        step = TrainStep(lm, opt, World(), stats, CLIP, UNROLL, PRECISIONS["fp32"])
        graphs = Recorded(fail)
        run = GraphedStep(step, graphs=graphs) if graphed else step
        for k, (_, tensors) in enumerate(batches):
            torch.manual_seed(k)
            run(tensors)
        reading = stats.read(World(), 0)
        results.append(([reading.sum_forward, reading.sum_backward], lm.state_dict()))
    padded = sum(t.mask is not None for _, t in batches)
    if fail:
        assert (graphs.warm_ups, graphs.captures, run.replays) == (2, 1, 0)
        assert run.failed.startswith("RuntimeError") and caplog.text.count("failed") == 1
    else:
        assert (graphs.warm_ups, graphs.captures) == (2, 1)
        assert run.replays == len(batches) - padded - 2 > 5 and run.failed is None
        assert run.capacity > max(len(t.tokens.chars) for _, t in batches[:2])
    (plain_sums, plain), (graphed_sums, from_graph) = results
    torch.testing.assert_close(graphed_sums, plain_sums, atol=1e-6, rtol=0)
    for name, value in plain.items():
        torch.testing.assert_close(from_graph[name], value, atol=1e-6, rtol=0, msg=name)


@CUDA
@pytest.mark.parametrize("optimizer, clip", [("adagrad", True), ("adam", True),
                                             ("adam", False)], ids=["adagrad", "adam",
                                                                    "adam-cudnn"])
def test_the_graphed_step_equals_the_eager_step_on_cuda(tmp_path, optimizer, clip):
    """fp32 without TF32 and without dropout (the graph draws its own dropout masks): a run
    of graph replays, eager steps for the batches with padding, a capture again when a batch
    has more distinct tokens, gives the eager run's losses and weights."""
    model, batches = _setup(tmp_path, clip=clip, dropout=0.0)
    device = torch.device("cuda")
    results = []
    for graphed in (False, True):
        lm = model().to(device)
        opt = build_optimizer(optimizer, [{"params": list(lm.parameters())}], 0.05, device,
                              capturable=graphed)
        if optimizer == "adam":
            # Adam divides a gradient by its running RMS, so a rare character's near-zero
            # gradient, whose rounding differs between the graph's kernels and eager ones,
            # moves its row by a good part of lr either way (seen on an H100 with eps 1e-8:
            # rows of the char embedding 1.3e-4 apart). eps 1e-3 keeps such updates in
            # proportion to the gradient, as Adagrad's initial accumulator of 1 does.
            opt.param_groups[0]["eps"] = 1e-3
        stats = StepStats(device)
        step = TrainStep(lm, opt, World(device=device), stats, CLIP, UNROLL,
                         PRECISIONS["fp32"])
        run = GraphedStep(step) if graphed else step
        with tf32_allowed(False):
            for _, tensors in batches:
                pinned = tensors.map(torch.Tensor.pin_memory)
                run(pinned if graphed else pinned.to(device))
        if graphed:
            assert run.failed is None and run.replays >= 5
        reading = stats.read(World(device=device), 0)
        results.append(([reading.sum_forward, reading.sum_backward],
                        {k: v.cpu() for k, v in lm.state_dict().items()}))
    (eager_sums, eager), (graph_sums, graphed_state) = results
    torch.testing.assert_close(graph_sums, eager_sums, atol=1e-5, rtol=1e-5)
    for name, value in eager.items():
        torch.testing.assert_close(graphed_state[name], value, atol=1e-5, rtol=1e-5,
                                   msg=lambda text, name=name: f"{name}: {text}")


@CUDA
@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_a_cuda_run_replays_its_steps_and_logs_what_an_eager_run_does(tmp_path, optimizer):
    """The trainer on CUDA with graphs (validations, checkpoints and the end of an epoch in
    between) against --no-cuda-graphs: the same logged losses and validation perplexities
    (fp32, no dropout), and the run resumes from its checkpoint."""
    train, valid = write_corpus(tmp_path, n_train=60)
    options = dict(device="cuda", precision="fp32", dropout=0.0, optimizer=optimizer,
                   softmax="sampled", num_samples=12, max_steps=16, log_every=4,
                   eval_every=8, checkpoint_every=6)
    metrics = {}
    for graphs in (True, False):
        out = tmp_path / f"graphs-{graphs}"
        trainer = Trainer(tiny_config(train, valid, cuda_graphs=graphs, **options), out,
                          progress=False)
        trainer.run()
        if graphs:
            assert trainer.train_step.failed is None and trainer.train_step.replays > 5
        metrics[graphs] = [json.loads(line) for line in
                           (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics[True]] == [m["step"] for m in metrics[False]]
    for got, want in zip(metrics[True], metrics[False], strict=True):
        for key in ("train_loss", "valid_ppl"):
            if key in want:
                assert got[key] == pytest.approx(want[key], rel=1e-4), (got["step"], key)
    more = tiny_config(train, valid, cuda_graphs=True, **{**options, "max_steps": 20})
    assert Trainer(more, tmp_path / "graphs-True", progress=False).run().step == 20


def test_an_unclipped_model_trains_through_cudnn_and_loads_everywhere(tmp_path, monkeypatch):
    """--no-lstm-clip: the LSTM trains through torch's kernel (cuDNN on a GPU), the model
    records null clips, loads as ours and exports to bilm-tf's format (which reads null as
    no clipping: `options['lstm'].get('cell_clip')` into TensorFlow's LSTMCell), and loads
    back the same."""
    train, valid = write_corpus(tmp_path)
    calls, real_run = [], CuDNNBackend.run

    def spy(self, *args):
        calls.append(self.layer)
        return real_run(self, *args)

    monkeypatch.setattr(CuDNNBackend, "run", spy)
    out = tmp_path / "run"
    assert main(train_args(train, valid, out, "--max-steps", "3", "--no-lstm-clip")) == 0
    assert len(calls) == 3 * 2  # every step, both layers
    model = load_model(out)
    assert model.bilm.config.cell_clip is None and model.bilm.config.proj_clip is None
    assert main(["export", str(out), str(tmp_path / "tf"), "--format", "bilm-tf"]) == 0
    options = json.loads(next((tmp_path / "tf").glob("*options*.json")).read_text())
    assert options["lstm"]["cell_clip"] is None and options["lstm"]["proj_clip"] is None
    exported = load_model(tmp_path / "tf")
    ids = model.bilm.batch_to_ids([["the", "cat", "sees", "a", "ball", "."]])
    with torch.no_grad():
        torch.testing.assert_close(exported.bilm(ids).layers, model.bilm(ids).layers,
                                   atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="--no-lstm-clip concerns a new model"):
        TrainConfig(train=[str(train)], init_from=str(out), lstm_clip=False)
