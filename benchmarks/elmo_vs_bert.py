"""ELMo or BERT for a tagger in production: words/s, latency and memory on the same sentences.

Encoders, each as its users run it:
- ELMo through `Embedder` (the `elmo embed` path; its word cache starts empty at each pass),
  every layer of each word out (a tagger mixes them): the shipped model of the language
  (`default`, `default-zh`) and random weights of the `small` and `original` presets; fp32 and
  int8 on the CPU, fp32, TF32 and bf16 on CUDA.
- BERT with random weights of the released configurations (BERT_SHAPES: the sizes of
  `bert-base-cased`, `bert-large-cased`, `bert-base-chinese`; speed does not depend on the
  values): Hugging Face `BertModel` (no pooler) with eager and with SDPA attention, SDPA in int8
  on the CPU (`torch.ao.quantization.quantize_dynamic` on the Linear layers); ONNX Runtime on
  the CPU: the eager model exported by `torch.onnx.export`, fused by ONNX Runtime's BERT
  optimizer (fp32), and that graph through `onnxruntime.quantization.quantize_dynamic` (int8).
  The words go through a WordPiece tokenizer (`tokenizers`, BERT's normalizer and
  pre-tokenizer) trained on the workload's training split with the released vocabulary size,
  `[CLS] pieces [SEP]` in windows of at most 510 pieces; a word's vector is the last layer at
  its first piece. Tokenizing and gathering are timed with the model.

Workloads (ELMO_SHARED, else ../shared, /data): a seeded sample of CoNLL-2003 English test
sentences (words) and of MSRA NER test sentences (characters: the tagger's tokens), the same
sentences and batches for every encoder; `--quick`: made-up sentences and tiny models.
Measured on one host in one run, encoders alternated (each repetition runs every encoder in
turn, the order rotated), at each thread count:
- batch 1: latency per sentence, p50 and p99 over every repetition;
- batches of `--batch-sizes` sentences (the sample sorted by length, then cut): words/s, the
  median of the repetitions;
- speed-up over BERT-base (Hugging Face, SDPA, fp32) at the same threads, >1 is faster;
- memory (CPU): a child process per encoder imports what a server of it imports, builds it and
  serves `--memory-sentences` sentences at batch 1 with one thread: its peak resident memory
  (VmHWM) and its resident memory after the imports. On CUDA: peak device memory of the
  batch-1 pass.

    python benchmarks/elmo_vs_bert.py [--threads 1 2] [--sentences 64] [--latency-sentences 16]
        [--repeats 1] [--batch-sizes 32 64] [--workloads conll2003 msra] [--out FILE]
    python benchmarks/elmo_vs_bert.py --quick --out FILE    # tiny models, made-up sentences

Writes JSON (default benchmarks/results/elmo_vs_bert.json) and a markdown table beside it.
torch, elmo, transformers and onnxruntime are imported where used, so that a memory child loads
only what a server of its encoder loads (ONNX Runtime: numpy, tokenizers, onnxruntime).
"""

from __future__ import annotations

import argparse
import bisect
import copy
import gc
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ELMO_SHARED", REPO.parent / "shared")) / "data"
MAX_PIECES = 510  # BERT's 512 positions less [CLS] and [SEP]
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0-4


@dataclass(frozen=True)
class BertShape:
    """A BERT's sizes, as its config.json gives them (512 positions, 2 token types)."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int


BERT_SHAPES = {  # the released config.json files
    "bert-base-cased": BertShape(768, 12, 12, 3072, 28996),
    "bert-large-cased": BertShape(1024, 24, 16, 4096, 28996),
    "bert-base-chinese": BertShape(768, 12, 12, 3072, 21128),
    "bert-tiny": BertShape(32, 2, 2, 64, 512),  # --quick
}


@dataclass(frozen=True)
class Workload:
    """A test set, the split its WordPiece vocabulary is trained on, and its encoders."""

    name: str
    test: str  # under the data folder (DATA)
    train: str
    unit: str  # what the tagger consumes: "words" or "characters"
    elmos: tuple[str, ...]  # shipped model names or presets
    berts: tuple[str, ...]  # BERT_SHAPES; the first is the reference of the speed-ups


WORKLOADS = {
    "conll2003": Workload("conll2003", "conll2003/eng.testb", "conll2003/eng.train", "words",
                          ("default", "small", "original"),
                          ("bert-base-cased", "bert-large-cased")),
    "msra": Workload("msra", "msra-ner/msra_test_bio", "msra-ner/msra_train_bio.gz",
                     "characters", ("default-zh", "small", "original"), ("bert-base-chinese",)),
}
QUICK_MODELS = {"elmos": ("tiny",), "berts": ("bert-tiny",)}


@dataclass(frozen=True)
class Encoder:
    """One row of the table: a model run by a runtime in a precision."""

    model: str  # "elmo default", "bert-base-cased", ...
    runtime: str  # a key of RUNTIMES
    precision: str  # fp32, int8 (CPU), tf32, bf16 (CUDA)

    @property
    def name(self) -> str:
        return f"{self.model} | {self.runtime} | {self.precision}"


@dataclass
class Served:
    """An encoder ready to serve: `encode(sentences)` -> per sentence its words' float32
    vectors, (words, dim) or, ELMo's, (layers, words, dim)."""

    encode: Callable[[list[list[str]]], list[np.ndarray]]
    parameters: int
    use_threads: Callable[[int], None]
    new_pass: Callable[[], None] = lambda: None  # ELMo: empties the word cache


# ---- sentences and word pieces ----------------------------------------------------------------


def read_sentences(path: Path) -> list[list[str]]:
    from elmo.tasks.readers import read_conll

    return [s.tokens for s in read_conll(path)]


def made_up_sentences(workload: str, n: int, seed: int) -> list[list[str]]:
    """--quick: sentences of English-like words (a few long rare ones, split into pieces) or
    of Chinese characters, the first longer than a BERT window."""
    rng = random.Random(seed)
    tokens = list("中国人民大会北京上海的是在了有和我他这个们来到时为地上生会年就国说") \
        if workload == "msra" else \
        ("the a of bank river money rates raised Germany EU Peter Blackburn said on Tuesday , "
         ". 1996-08-22 interdisciplinary counterproductive").split()
    lengths = [MAX_PIECES + 90, *(rng.randint(3, 40) for _ in range(n - 1))]
    return [[rng.choice(tokens) for _ in range(length)] for length in lengths]


def train_wordpiece(sentences: list[list[str]], vocab_size: int):
    """A BERT WordPiece tokenizer (cased normalizer, CJK characters apart) trained on
    `sentences` with a vocabulary of at most `vocab_size`."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                        show_progress=False)
    tokenizer.train_from_iterator((" ".join(s) for s in sentences), trainer,
                                  length=len(sentences))
    return tokenizer


@dataclass
class PieceBatch:
    """A batch of sentences as BERT's input: windows of pieces, and each word's first piece."""

    input_ids: np.ndarray  # (windows, T) int64
    attention_mask: np.ndarray  # (windows, T) int64
    first_piece: np.ndarray  # (words,) row of the flattened (windows * T) output
    words: list[int]  # words per sentence
    pieces: int  # word pieces, [CLS] and [SEP] left out


def piece_batch(tokenizer, sentences: list[list[str]], max_pieces: int = MAX_PIECES
                ) -> PieceBatch:
    """`sentences` -> [CLS] pieces [SEP] windows (a longer sentence cut between words into
    windows of <= max_pieces), padded to the longest window."""
    encodings = tokenizer.encode_batch(sentences, is_pretokenized=True, add_special_tokens=False)
    windows: list[list[int]] = []
    firsts: list[tuple[int, int]] = []
    pieces = 0
    for words, encoding in zip(sentences, encodings, strict=True):
        ids, word_ids = encoding.ids, encoding.word_ids
        pieces += len(ids)
        start = [-1] * len(words)  # -1: a word with no piece (all removed by the normalizer)
        for i in reversed(range(len(ids))):
            start[word_ids[i]] = i
        starts = sorted(set(start) - {-1})
        cuts = [0]  # windows: greedy, <= max_pieces pieces, cut where a word starts
        for i, end in zip(starts, [*starts[1:], len(ids)], strict=True):
            if end - cuts[-1] > max_pieces and i > cuts[-1]:
                cuts.append(i)
        cuts.append(len(ids))
        first_window = len(windows)
        windows += [[2, *ids[a:b], 3] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
        for i in start:  # (window, position); a word with no piece gets its [CLS]
            k = bisect.bisect_right(cuts, i, hi=len(cuts) - 1) - 1 if i >= 0 else 0
            firsts.append((first_window + k, i - cuts[k] + 1 if i >= 0 else 0))
    width = max(map(len, windows))
    input_ids = np.zeros((len(windows), width), dtype=np.int64)
    mask = np.zeros_like(input_ids)
    for r, window in enumerate(windows):
        input_ids[r, : len(window)] = window
        mask[r, : len(window)] = 1
    first = np.array([w * width + p for w, p in firsts], dtype=np.int64)
    return PieceBatch(input_ids, mask, first, [len(s) for s in sentences], pieces)


def per_sentence(vectors: np.ndarray, words: list[int]) -> list[np.ndarray]:
    return np.split(vectors, np.cumsum(words)[:-1])


# ---- building the encoders ---------------------------------------------------------------------


def random_bert(model: str, attention: str, device: str):
    """A BertModel (no pooler) of a released shape with random weights (seed 0)."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(**asdict(BERT_SHAPES[model]), attn_implementation=attention)
    return BertModel(config, add_pooling_layer=False).eval().to(device)


def bert_parameters(shape: BertShape) -> int:
    """Parameters of BertModel without its pooler: embeddings (words, 512 positions, 2 token
    types, LayerNorm), then per layer Q, K, V, output, feed-forward and two LayerNorms."""
    h, i = shape.hidden_size, shape.intermediate_size
    return (shape.vocab_size + 514) * h + 2 * h \
        + shape.num_hidden_layers * (4 * h * h + 2 * h * i + 9 * h + i)


class Setup:
    """What the encoders are built from, once: the device, the WordPiece tokenizers (trained,
    or read back from `work` in a memory child), the BERT modules and the ONNX files."""

    def __init__(self, device: str, work: Path, train: dict[str, list[list[str]]] | None = None
                 ) -> None:
        self.device, self.work, self.train = device, work, train or {}
        self._tokenizers: dict[str, Any] = {}
        self._berts: dict[tuple[str, str], Any] = {}
        self.onnx_fusions: dict[str, dict[str, int]] = {}

    def tokenizer(self, workload: str, vocab_size: int):
        path = self.work / f"{workload}.tokenizer.json"
        if workload not in self._tokenizers:
            from tokenizers import Tokenizer

            if not path.exists():
                train_wordpiece(self.train[workload], vocab_size).save(str(path))
            self._tokenizers[workload] = Tokenizer.from_file(str(path))
        return self._tokenizers[workload]

    def bert(self, model: str, attention: str):
        """The fp32 BertModel the rows of `model` with `attention` share: random weights, or
        where `model` is built with another attention, a copy of its weights."""
        if (model, attention) not in self._berts:
            self._berts[model, attention] = self.own_bert(model, attention)
        return self._berts[model, attention]

    def own_bert(self, model: str, attention: str):
        """A BertModel of its own (for int8, quantized in place): a copy of one already built
        (faster than initializing 340 M random weights), else a new one."""
        built = next((m for (name, _), m in self._berts.items() if name == model), None)
        if built is None:
            return random_bert(model, attention, self.device)
        bert = copy.deepcopy(built)
        bert.set_attn_implementation(attention)
        return bert

    def forget_models(self) -> None:
        """Let go of the BERT modules built so far (a workload's encoders are done)."""
        self._berts.clear()

    def onnx_file(self, model: str, precision: str) -> Path:
        """The eager BertModel exported, fused by ONNX Runtime's BERT optimizer (fp32), and
        that graph with dynamic int8 quantization (int8)."""
        path = self.work / f"{model}.{precision}.onnx"
        if path.exists():
            return path
        if precision == "int8":
            from onnx import TensorProto
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(self.onnx_file(model, "fp32"), path, weight_type=QuantType.QInt8,
                             extra_options={"DefaultTensorType": TensorProto.FLOAT})
            return path
        import torch
        from onnxruntime.transformers.optimizer import optimize_model

        class LastLayer(torch.nn.Module):
            def __init__(self, bert: torch.nn.Module) -> None:
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask):
                return self.bert(input_ids=input_ids,
                                 attention_mask=attention_mask).last_hidden_state

        shape = BERT_SHAPES[model]
        ids = torch.randint(5, shape.vocab_size, (2, 16))
        mask = torch.ones_like(ids)
        mask[1, 9:] = 0  # a padded row: the mask must stay an input of the graph
        raw = self.work / f"{model}.exported.onnx"
        axes = {0: "batch", 1: "pieces"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(LastLayer(self.bert(model, "eager")).eval(), (ids, mask), raw,
                              dynamo=False, input_names=["input_ids", "attention_mask"],
                              output_names=["last_hidden_state"], opset_version=17,
                              dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                            "last_hidden_state": axes})
        # opt_level 0: the fusions alone; the session's own optimizations come at its start
        fused = optimize_model(str(raw), model_type="bert", num_heads=shape.num_attention_heads,
                               hidden_size=shape.hidden_size, opt_level=0)
        self.onnx_fusions[model] = {op: n for op, n in
                                    fused.get_fused_operator_statistics().items() if n}
        fused.save_model_to_file(str(path))
        raw.unlink()
        return path


def torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def build_elmo(encoder: Encoder, workload: Workload, setup: Setup) -> Served:
    from common import n_parameters, random_model

    from elmo.embed import Embedder
    from elmo.loading import load_model
    from elmo.loading.resolve import shipped_models

    name = encoder.model.removeprefix("elmo ")
    bilm = load_model(name, progress=False).bilm if name in shipped_models() \
        else random_model(name)
    int8 = encoder.precision == "int8"
    parameters = n_parameters(bilm)  # before int8 drops the fp32 weights
    embedder = Embedder(bilm, device=setup.device, batch_size=10**6, max_tokens=10**9,
                        quantize="int8" if int8 else None,
                        precision="fp32" if int8 else encoder.precision)
    return Served(embedder.embed_batch, parameters, torch_threads, embedder.token_cache.clear)


def build_hf(encoder: Encoder, workload: Workload, setup: Setup) -> Served:
    import torch

    from elmo.device import computing_in

    shape = BERT_SHAPES[encoder.model]
    tokenizer = setup.tokenizer(workload.name, shape.vocab_size)
    attention = encoder.runtime.removeprefix("hf ")
    if encoder.precision == "int8":  # a model of its own, quantized in place
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated, still there
            model = quantize_dynamic(setup.own_bert(encoder.model, attention),
                                     {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    else:
        model = setup.bert(encoder.model, attention)
        assert sum(p.numel() for p in model.parameters()) == bert_parameters(shape)
    device = torch.device(setup.device)
    precision = "fp32" if encoder.precision == "int8" else encoder.precision

    def encode(sentences: list[list[str]]) -> list[np.ndarray]:
        batch = piece_batch(tokenizer, sentences)
        with torch.inference_mode(), computing_in(precision, device):
            hidden = model(input_ids=torch.from_numpy(batch.input_ids).to(device),
                           attention_mask=torch.from_numpy(batch.attention_mask).to(device)
                           ).last_hidden_state
            words = hidden.reshape(-1, hidden.shape[-1]).index_select(
                0, torch.from_numpy(batch.first_piece).to(device))
            return per_sentence(words.float().cpu().numpy(), batch.words)

    return Served(encode, bert_parameters(shape), torch_threads)


def build_onnxruntime(encoder: Encoder, workload: Workload, setup: Setup) -> Served:
    import onnxruntime as ort

    shape = BERT_SHAPES[encoder.model]
    tokenizer = setup.tokenizer(workload.name, shape.vocab_size)
    path = setup.onnx_file(encoder.model, encoder.precision)
    sessions: dict[int, Any] = {}  # one per thread count: ONNX Runtime fixes it per session
    session = None

    def use_threads(n: int) -> None:
        nonlocal session
        if n not in sessions:
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = n, 1
            sessions[n] = ort.InferenceSession(str(path), options,
                                               providers=["CPUExecutionProvider"])
        session = sessions[n]

    def encode(sentences: list[list[str]]) -> list[np.ndarray]:
        batch = piece_batch(tokenizer, sentences)
        hidden = session.run(None, {"input_ids": batch.input_ids,
                                    "attention_mask": batch.attention_mask})[0]
        return per_sentence(hidden.reshape(-1, shape.hidden_size)[batch.first_piece],
                            batch.words)

    return Served(encode, bert_parameters(shape), use_threads)


@dataclass(frozen=True)
class Runtime:
    """How a family of encoders is built, in which precisions on which device, and which
    modules a server of it imports (what a memory child loads before measuring)."""

    build: Callable[[Encoder, Workload, Setup], Served]
    precisions: dict[str, tuple[str, ...]]  # device type -> precisions
    imports: tuple[str, ...]


CUDA_PRECISIONS = ("fp32", "tf32", "bf16")
RUNTIMES = {
    "elmo": Runtime(build_elmo, {"cpu": ("fp32", "int8"), "cuda": CUDA_PRECISIONS},
                    ("torch", "elmo.embed", "elmo.loading", "common")),
    "hf eager": Runtime(build_hf, {"cpu": ("fp32",), "cuda": CUDA_PRECISIONS},
                        ("torch", "tokenizers", "transformers.models.bert.modeling_bert")),
    "hf sdpa": Runtime(build_hf, {"cpu": ("fp32", "int8"), "cuda": CUDA_PRECISIONS},
                       ("torch", "tokenizers", "transformers.models.bert.modeling_bert")),
    "onnxruntime": Runtime(build_onnxruntime, {"cpu": ("fp32", "int8")},
                           ("numpy", "onnxruntime", "tokenizers")),
}
REFERENCE = ("hf sdpa", "fp32")  # with the workload's first BERT: what a user gets by default


# ---- measuring ----------------------------------------------------------------------------------


@dataclass
class Sample:
    """The sentences of one workload a run measures, and the encoders it measures on them."""

    workload: Workload
    sentences: list[list[str]]  # throughput, longest first
    latency: list[list[str]]  # batch 1
    encoders: list[Encoder]
    reference: Encoder  # BERT-base as users get it by default: what the speed-ups divide by

    def batches(self, size: int) -> list[list[list[str]]]:
        return [self.sentences[i : i + size] for i in range(0, len(self.sentences), size)]

    @property
    def words(self) -> int:
        return sum(map(len, self.sentences))


def sample_of(workload: Workload, n: int, n_latency: int, device: str, data: Path,
              quick: bool) -> tuple[Sample, list[list[str]]]:
    """(a seeded sample of `n` test sentences, `n_latency` of them for batch 1; the training
    sentences of the WordPiece vocabulary)."""
    if quick:
        test = made_up_sentences(workload.name, n, 1)
        train = made_up_sentences(workload.name, 300, 2)
    else:
        test, train = read_sentences(data / workload.test), read_sentences(data / workload.train)
    chosen = random.Random(0).sample(test, min(n, len(test)))
    elmos = QUICK_MODELS["elmos"] if quick else workload.elmos
    berts = QUICK_MODELS["berts"] if quick else workload.berts
    kind = device.split(":")[0]
    encoders = [Encoder(f"elmo {m}" if runtime == "elmo" else m, runtime, precision)
                for runtime, spec in RUNTIMES.items()
                for m in (elmos if runtime == "elmo" else berts)
                for precision in spec.precisions.get(kind, ())]
    return Sample(workload, sorted(chosen, key=len, reverse=True), chosen[:n_latency], encoders,
                  Encoder(berts[0], *REFERENCE)), train


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def pass_seconds(served: Served, batches: list[list[list[str]]], device: str) -> float:
    served.new_pass()
    synchronize(device)
    start = time.perf_counter()
    for batch in batches:
        served.encode(batch)
    synchronize(device)
    return time.perf_counter() - start


def latencies(served: Served, sentences: list[list[str]], device: str) -> list[float]:
    served.new_pass()
    seconds = []
    for sentence in sentences:
        synchronize(device)
        start = time.perf_counter()
        served.encode([sentence])
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return seconds


def peak_device_mb(device: str, work: Callable[[], Any]) -> tuple[Any, float | None]:
    """work() and the peak CUDA memory while it ran (None off CUDA)."""
    if not device.startswith("cuda"):
        return work(), None
    import torch

    torch.cuda.reset_peak_memory_stats(device)
    result = work()
    return result, torch.cuda.max_memory_allocated(device) / 2**20


def differences(served: dict[Encoder, Served], sentences: list[list[str]]) -> dict[str, float]:
    """Per encoder, mean |vector - fp32's| / mean |fp32's| over the words of `sentences`,
    against the same model in fp32 (BERT: Hugging Face eager). Each sentence must come out
    with one vector per word."""
    outputs = {}
    for encoder, s in served.items():
        out = s.encode(sentences)
        if [o.shape[-2] for o in out] != [len(x) for x in sentences]:
            raise AssertionError(f"{encoder.name}: not one vector per word")
        outputs[encoder] = np.concatenate([o.reshape(-1) for o in out])
    result = {}
    for encoder, out in outputs.items():
        fp32 = outputs.get(Encoder(encoder.model, "elmo" if encoder.runtime == "elmo"
                                   else "hf eager", "fp32"))
        if fp32 is not None:
            result[encoder.name] = float(np.abs(out - fp32).mean() / np.abs(fp32).mean())
    return result


def percentile_ms(seconds: list[float], q: float) -> float:
    return 1000 * float(np.percentile(seconds, q))


def compare(samples: list[Sample], setup: Setup, threads: list[int], batch_sizes: list[int],
            repeats: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every encoder of every sample, alternated: the rows, with speed-ups over BERT-base.
    One workload after the other: its encoders are built, measured, then let go (a process
    holds one workload's encoders at a time)."""
    start = time.perf_counter()
    parameters: dict[tuple[str, Encoder], int] = {}
    build_seconds: dict[str, float] = {}
    differ: dict[str, dict[str, float]] = {}
    seconds: dict[tuple, list[float]] = defaultdict(list)
    latency: dict[tuple, list[float]] = defaultdict(list)
    device_peak: dict[tuple, float | None] = {}
    for sample in samples:
        served: dict[Encoder, Served] = {}
        for encoder in sample.encoders:
            began, what = time.perf_counter(), f"{sample.workload.name}: {encoder.name}"
            served[encoder] = RUNTIMES[encoder.runtime].build(encoder, sample.workload, setup)
            parameters[sample.workload.name, encoder] = served[encoder].parameters
            build_seconds[what] = round(time.perf_counter() - began, 1)
            log(f"built {what} ({build_seconds[what]} s)")
        for s in served.values():
            s.use_threads(threads[0])
        differ[sample.workload.name] = differences(served, sample.sentences[:8])
        for rep in range(repeats):
            began = time.perf_counter()
            for t in threads:
                turn = rep % len(sample.encoders)  # the order rotates with the repetitions
                for encoder in sample.encoders[turn:] + sample.encoders[:turn]:
                    s, key = served[encoder], (sample.workload.name, encoder, t)
                    s.use_threads(t)
                    if rep == 0:  # warm-up: first-call weight packing, sessions' first runs
                        s.encode(sample.batches(max(batch_sizes))[0])
                        for sentence in sample.latency[:2]:
                            s.encode([sentence])
                    times, peak = peak_device_mb(setup.device, lambda s=s, sample=sample:
                                                 latencies(s, sample.latency, setup.device))
                    latency[key] += times
                    device_peak.setdefault(key, peak)
                    for b in batch_sizes:
                        seconds[(*key, b)].append(
                            pass_seconds(s, sample.batches(b), setup.device))
            spent = time.perf_counter() - began
            log(f"{sample.workload.name}: repetition {rep + 1}/{repeats}: {spent:.0f} s" + (
                f", about {spent * (repeats - rep - 1) / 60:.1f} min to go for it"
                if rep + 1 < repeats else ""))
        del served
        setup.forget_models()
        gc.collect()
    rows = []
    for sample in samples:
        name = sample.workload.name
        for t in threads:
            for encoder in sample.encoders:
                key = (name, encoder, t)
                rows.append({
                    "workload": name, "model": encoder.model, "runtime": encoder.runtime,
                    "precision": encoder.precision, "threads": t,
                    "parameters": parameters[name, encoder],
                    "latency_ms": {"p50": percentile_ms(latency[key], 50),
                                   "p99": percentile_ms(latency[key], 99),
                                   "samples": len(latency[key])},
                    "words_per_s": {str(b): sample.words / float(np.median(seconds[(*key, b)]))
                                    for b in batch_sizes},
                    "words_per_s_each": {str(b): [sample.words / x for x in seconds[(*key, b)]]
                                         for b in batch_sizes},
                    "peak_device_mb": device_peak[key],
                    "mean_relative_difference_from_fp32": differ[name].get(encoder.name),
                })
    add_speedups(rows, samples)
    return {"rows": rows, "build_seconds": build_seconds, "onnx_fusions": setup.onnx_fusions,
            "seconds": round(time.perf_counter() - start, 1)}


def add_speedups(rows: list[dict], samples: list[Sample]) -> None:
    """Each row's speed over its sample's reference at the same threads: words/s over the
    reference's words/s, the reference's p50 latency over this row's (>1: faster)."""
    reference = {}
    for sample in samples:
        ref = sample.reference
        for r in rows:
            if (r["workload"], r["model"], r["runtime"], r["precision"]) == \
                    (sample.workload.name, ref.model, ref.runtime, ref.precision):
                reference[r["workload"], r["threads"]] = r
    for r in rows:
        ref = reference[r["workload"], r["threads"]]
        r["speedup_over_bert_base_fp32"] = {
            "latency_p50": ref["latency_ms"]["p50"] / r["latency_ms"]["p50"],
            **{b: r["words_per_s"][b] / ref["words_per_s"][b] for b in r["words_per_s"]}}


# ---- memory: a child process per encoder ---------------------------------------------------------


def rss_mb(field: str) -> float:
    """This process's VmRSS (resident now) or VmHWM (its peak) in MB. Not ru_maxrss: a child
    started by exec keeps there the peak of the process it was forked from, here the parent
    holding every encoder."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(spec: dict[str, Any]) -> None:
    """In the child: import what a server of the encoder imports, build it, serve the
    sentences one at a time with one thread; print the resident memory after the imports and
    at the end, and the peak."""
    import importlib

    encoder = Encoder(**spec["encoder"])
    for module in RUNTIMES[encoder.runtime].imports:
        importlib.import_module(module)
    baseline = rss_mb("VmRSS")
    work = Path(spec["work"])
    served = RUNTIMES[encoder.runtime].build(encoder, WORKLOADS[spec["workload"]],
                                             Setup("cpu", work))
    served.use_threads(1)
    for sentence in json.loads((work / f"{spec['workload']}.memory.json").read_text()):
        served.encode([sentence])
    print(json.dumps({"baseline_rss_mb": baseline, "rss_mb": rss_mb("VmRSS"),
                      "peak_rss_mb": rss_mb("VmHWM")}))


def peak_rss(spec: dict[str, Any]) -> dict[str, Any]:
    """A memory child's printout (see memory_child)."""
    done = subprocess.run([sys.executable, __file__, "--memory-child", json.dumps(spec)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the memory child of {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def memory(samples: list[Sample], work: Path, n_sentences: int, parallel: int,
           log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Peak RSS of each encoder serving batch 1 (children `parallel` at a time: a process's
    peak does not depend on the others)."""
    from concurrent.futures import ThreadPoolExecutor

    specs = []
    for sample in samples:
        (work / f"{sample.workload.name}.memory.json").write_text(
            json.dumps(sample.latency[:n_sentences], ensure_ascii=False), encoding="utf-8")
        specs += [{"workload": sample.workload.name, "encoder": asdict(e), "work": str(work)}
                  for e in sample.encoders]
    with ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(peak_rss, specs))
    log(f"memory: {len(specs)} children")
    return [{"workload": s["workload"], **s["encoder"], "sentences": n_sentences, **r}
            for s, r in zip(specs, results, strict=True)]


# ---- report --------------------------------------------------------------------------------------


def versions() -> dict[str, str | None]:
    import importlib.metadata as metadata

    found: dict[str, str | None] = {}
    for package in ("torch", "transformers", "tokenizers", "onnxruntime", "onnx"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def workload_stats(sample: Sample, setup: Setup) -> dict[str, Any]:
    """Sentences, words and (per BERT tokenizer) word pieces of the sample."""
    stats = {"unit": sample.workload.unit, "sentences": len(sample.sentences),
             "words": sample.words, "latency_sentences": len(sample.latency),
             "latency_words": sum(map(len, sample.latency))}
    bert = next((e.model for e in sample.encoders if e.runtime != "elmo"), None)
    if bert is not None:
        tokenizer = setup.tokenizer(sample.workload.name, BERT_SHAPES[bert].vocab_size)
        batch = piece_batch(tokenizer, sample.sentences)
        stats.update(wordpieces=batch.pieces, wordpieces_per_word=batch.pieces / sample.words,
                     bert_windows=len(batch.input_ids),
                     tokenizer_vocabulary=tokenizer.get_vocab_size())
    return stats


def markdown(result: dict[str, Any]) -> str:
    """One table per workload: latency, words/s, speed-ups, memory."""
    h = result["host"]
    lines = [f"{h['cpu']}, {h['cpu_count']} cores ({', '.join(h['isa']) or 'no AVX2'}), torch "
             f"{h['torch']}, transformers {h['transformers']}, onnxruntime {h['onnxruntime']}, "
             f"{result['date']}", ""]
    memory_of = {(m["workload"], m["model"], m["runtime"], m["precision"]): m
                 for m in result.get("memory", [])}
    sizes = result["settings"]["batch_sizes"]
    for name, stats in result["workloads"].items():
        lines += [f"## {name}: {stats['sentences']} sentences, {stats['words']:,} "
                  f"{stats['unit']}"
                  + (f", {stats['wordpieces']:,} word pieces ({stats['wordpieces_per_word']:.2f} "
                     "a word)" if "wordpieces" in stats else ""), ""]
        header = ["encoder", "runtime", "precision", "threads", "b1 p50 ms", "b1 p99 ms",
                  *(f"words/s b{b}" for b in sizes), "x b1",
                  *(f"x b{b}" for b in sizes), "peak RSS MB (imports)"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in (r for r in result["rows"] if r["workload"] == name):
            m = memory_of.get((name, r["model"], r["runtime"], r["precision"]))
            x = r["speedup_over_bert_base_fp32"]
            cells = [r["model"], r["runtime"], r["precision"], str(r["threads"]),
                     f"{r['latency_ms']['p50']:.1f}", f"{r['latency_ms']['p99']:.1f}",
                     *(f"{r['words_per_s'][str(b)]:,.0f}" for b in sizes),
                     f"{x['latency_p50']:.2f}", *(f"{x[str(b)]:.2f}" for b in sizes),
                     f"{m['peak_rss_mb']:,.0f} ({m['baseline_rss_mb']:,.0f})" if m else (
                         f"{r['peak_device_mb']:,.0f} (device)" if r["peak_device_mb"] else "")]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole measurement (see the module's docstring): the result as written to JSON."""
    from common import cpu_info, machine_info

    from elmo.extras import import_extra

    for module in ("transformers", "tokenizers") + (("onnxruntime",) if args.device == "cpu"
                                                     else ()):
        import_extra(module, "benchmarks/elmo_vs_bert.py")
    samples, train = [], {}
    for name in args.workloads:
        sample, train[name] = sample_of(WORKLOADS[name], args.sentences, args.latency_sentences,
                                        args.device, args.data, args.quick)
        samples.append(sample)
    logging.disable(logging.WARNING)  # the ONNX optimizer's and quantizer's notes
    try:
        with tempfile.TemporaryDirectory(prefix="elmo-vs-bert-") as tmp:
            setup = Setup(args.device, Path(tmp), train)
            result: dict[str, Any] = {
                "host": {**cpu_info(), **machine_info(), **versions()},
                "command": " ".join(sys.argv),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                             if k not in ("out", "memory_child")},
                "workloads": {s.workload.name: workload_stats(s, setup) for s in samples},
                "bert_shapes": {m: asdict(s) for m, s in BERT_SHAPES.items()},
            }
            result.update(compare(samples, setup, args.threads, args.batch_sizes, args.repeats,
                                  log))
            result["peak_rss_mb_of_this_run"] = rss_mb("VmHWM")  # every encoder at once
            if args.device == "cpu" and args.memory_sentences:
                began = time.perf_counter()
                result["memory"] = memory(samples, Path(tmp), args.memory_sentences,
                                          args.memory_parallel, log)
                result["memory_seconds"] = round(time.perf_counter() - began, 1)
    finally:
        logging.disable(logging.NOTSET)
    return result


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options (--quick: its sizes)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " Needs pip install -e '.[bench]' "
        "(transformers, tokenizers, ONNX Runtime).",
        epilog="Both workloads take about 20 minutes alone on a 2-core host, and the memory "
        "children peaked at 21 GB (English) and 9 GB (Chinese) together; --quick runs in "
        "seconds. How it is measured: benchmarks/README.md, 'ELMo or BERT'.")
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS),
                   help="conll2003: CoNLL-2003 eng.testb (English words); msra: MSRA NER test "
                   "(Chinese characters); default: both")
    p.add_argument("--data", type=Path, default=DATA,
                   help="the folder of conll2003/ and msra-ner/ (default: ELMO_SHARED/data)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda (no ONNX Runtime)")
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2],
                   help="torch thread counts, each measured in turn (default: 1 2)")
    p.add_argument("--sentences", type=int, default=64,
                   help="sentences of each workload timed in batches (a seeded sample; "
                   "default 64)")
    p.add_argument("--latency-sentences", type=int, default=16,
                   help="of those, timed one at a time (default 16)")
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[32, 64],
                   help="sentences a batch for the words/s columns (default: 32 64)")
    p.add_argument("--repeats", type=int, default=1,
                   help="passes of every encoder, alternated (default 1)")
    p.add_argument("--memory-sentences", type=int, default=16,
                   help="sentences a memory child serves (0: no memory children; default 16)")
    p.add_argument("--memory-parallel", type=int, default=2,
                   help="memory children at a time (default 2)")
    p.add_argument("--quick", action="store_true", help="tiny BERT and ELMo, made-up sentences, "
                   "24 of them, 4 at batch 1, one repetition (a smoke run)")
    p.add_argument("--out", type=Path, help="JSON (default: benchmarks/results/elmo_vs_bert.json;"
                   " quick: under $TMPDIR/elmo-bench-quick/); the markdown table beside it")
    p.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.sentences, args.latency_sentences, args.repeats = 24, 4, 1
        args.memory_sentences = min(args.memory_sentences, 4)
    return args


def main() -> None:
    args = options()
    if args.memory_child:
        memory_child(json.loads(args.memory_child))
        return
    from common import results_file, write_json

    missing = [w for w in args.workloads if not (args.data / WORKLOADS[w].test).exists()]
    if missing and not args.quick:
        sys.exit(f"{', '.join(missing)} not found under {args.data} (set ELMO_SHARED or --data)")
    result = run(args)
    out = args.out or results_file("elmo_vs_bert.json", args.quick)
    write_json(out, result)
    table = markdown(result)
    out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)


if __name__ == "__main__":
    main()
