"""int8 inference: the kernels' arithmetic, closeness to fp32, every entry point, clear errors.

Tolerance: weights and each activation row are rounded to 8 bits with their own scale, an error
of at most half a step (max |v| / 254) per element, about 0.2% of the row's largest value on
average. It compounds through the char-CNN, two LSTM layers and their recurrence: on the tiny
random model the mean relative error per layer measures 0.2-0.3% (0.4-0.7% with the
projections in int8 too; the shipped model's: benchmarks/README.md). We require < 3% per layer, and
that int8 did run (error > 0); on a model with large activations, < 2%.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from elmo import Elmo, batch_to_ids, save_pretrained
from elmo.cli import main
from elmo.embed import Embedder
from elmo.errors import ElmoError
from elmo.modules import quantize
from elmo.modules.bilm import model_identity
from elmo.modules.lstm_backends import WEIGHT_NAMES
from elmo.modules.quantize import Int8Linear, int8_matmul, quantize_columns
from elmo.tasks.config import TaskConfig
from tests.conftest import random_bilm
from tests.helpers.int8 import large_activation_bilm, use_exact_int8
from tests.helpers.tasks import CONLLU, task_args

SENTENCES = [["the", "cat", "sat", "on", "the", "mat", "."], ["北京", "欢迎", "你"], ["a"],
             ["bank", "of", "the", "river", ",", "money", "in", "the", "bank"] * 3]
TOLERANCE = 0.03  # mean relative error per layer, see the module docstring


def mean_relative_errors(got: list[np.ndarray], expected: list[np.ndarray]) -> np.ndarray:
    """Per layer: mean |got - expected| / mean |expected| over all sentences' tokens."""
    diff = np.concatenate([np.abs(g - e) for g, e in zip(got, expected, strict=True)], axis=1)
    size = np.concatenate([np.abs(e) for e in expected], axis=1)
    return diff.mean(axis=(1, 2)) / size.mean(axis=(1, 2))


def _kernel(name: str) -> quantize.Int8Kernel:
    kernel = quantize.INT8_KERNELS[name]
    if not kernel.runs_here():
        pytest.skip(f"the int8 kernel {name} does not run here (e.g. no VNNI, no fbgemm)")
    return kernel


def _operands(kernel: quantize.Int8Kernel, weight: torch.Tensor, scale: torch.Tensor) -> list:
    """int8 weight (K, N) or (D, K, N) and its scales -> int8_matmul's `operands`."""
    k, n = weight.shape[-2:]
    return [kernel.pack(w, s) for w, s in zip(weight.view(-1, k, n), scale.view(-1, 1, n),
                                               strict=True)]


@pytest.mark.parametrize("bits", [7, 8])
@pytest.mark.parametrize("name", list(quantize.INT8_KERNELS))
def test_int8_matmul_is_the_exact_product_of_the_quantized_operands(name, bits):
    """Every kernel, the AVX2 ones (7-bit, and 8-bit split by sign) even on a host with VNNI:
    the exact integer product of the rounded rows and columns, no saturation."""
    kernel = _kernel(name)
    levels = 63 if kernel.saturating and bits == 7 else 127
    torch.manual_seed(0)
    x, w, add = torch.randn(37, 70), torch.randn(70, 90), torch.randn(37, 90)
    x[3] = x[3].abs() * 50  # a row without negative values, among others
    w_int8, w_scale = quantize_columns(w)
    x_scale = x.abs().amax(1, keepdim=True) / levels
    x_int = torch.round(x / x_scale)
    expected = (x_int.double() @ w_int8.double()) * w_scale * x_scale + add
    operands = _operands(kernel, w_int8, w_scale)
    got = int8_matmul(x, kernel, operands, add, bits=bits)
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    assert (w_int8.abs() <= 127).all() and w_int8.dtype == torch.int8
    # ... and close to the fp32 product: each operand is rounded to 8 (or 7) bits.
    error = ((got - (x @ w + add)).norm() / (x @ w).norm()).item()
    assert 0 < error < (0.03 if levels == 63 else 0.015)
    # The rows are independent: a row alone gets what it got in the batch.
    for row in (0, 3):
        torch.testing.assert_close(int8_matmul(x[row : row + 1], kernel, operands, add[row],
                                               bits=bits)[0], got[row], rtol=1e-6, atol=1e-5)
    # Batched over a leading axis (the LSTM's directions), written into its addend.
    xs, ws = torch.stack([x, -2 * x]), torch.stack([w, w.flip(0)])
    ws_int8, ws_scale = quantize_columns(ws)
    batched_operands = _operands(kernel, ws_int8, ws_scale)
    batched = int8_matmul(xs, kernel, batched_operands, add.expand(2, -1, -1).clone(),
                          bits=bits)
    for k in range(2):
        torch.testing.assert_close(batched[k], int8_matmul(xs[k], kernel, batched_operands[k:k + 1],
                                                           add, bits=bits))
    into = add.expand(2, -1, -1).clone()
    assert int8_matmul(xs, kernel, batched_operands, into, out=into, bits=bits) is into
    torch.testing.assert_close(into, batched)


def test_int8_linear_matches_linear_and_zero_rows_stay_zero():
    torch.manual_seed(1)
    linear = torch.nn.Linear(64, 32)
    x = torch.randn(5, 3, 64)
    x[0, 0] = 0
    with torch.inference_mode():
        got, expected = Int8Linear(linear)(x), linear(x)
    assert got.shape == (5, 3, 32)
    torch.testing.assert_close(got[0, 0], linear.bias.detach())
    assert ((got - expected).norm() / expected.norm()).item() < 0.02


def test_int8_vectors_are_close_to_fp32_and_batch_independent():
    expected = Embedder(random_bilm(seed=5)).embed_sentences(SENTENCES)
    embedder = Embedder(random_bilm(seed=5), quantize="int8")
    got = embedder.embed_sentences(SENTENCES)
    errors = mean_relative_errors(got, expected)
    assert errors.shape == (3,) and (errors > 0).all() and (errors < TOLERANCE).all(), errors
    # Per-row activation scales and exact int32 sums: a sentence's vectors do not depend on
    # the other sentences of its batch, as in fp32.
    for sentence, layers in zip(SENTENCES, got, strict=True):
        np.testing.assert_allclose(embedder.embed_sentence(sentence), layers, atol=1e-5)


def _every_product_in_int8(bilm):
    """`bilm` with every product in int8, the projections too: what `quantize_` leaves out."""
    for layer in bilm.lstm.layers:
        layer.quantize_int8_(WEIGHT_NAMES)
    quantize.quantize_linears_(bilm.token_encoder)
    return bilm


@pytest.mark.parametrize("name", ["exact", "fbgemm-no-vnni"])
def test_worst_layer_within_2_percent_where_activations_are_large(name, monkeypatch):
    """A model whose values reach ~6 and whose projections read a few saturated cells among
    many small ones, as the shipped `default`: every layer within 2% of fp32 with 8-bit
    activations (the exact kernel) and with 7 bits for the input and state products (no VNNI);
    with the projections in int8 too, its worst layer was over 2% (benchmarks/README.md)."""
    if name == "exact":
        use_exact_int8(monkeypatch)
    else:
        _kernel(name)
        monkeypatch.setenv(quantize.KERNEL_ENV, name)
    rng = np.random.default_rng(0)
    words = "the bank raised rates ; we sat on a river bank and played music .".split()
    sentences = [list(rng.choice(words, rng.integers(3, 25))) for _ in range(20)]
    expected = Embedder(large_activation_bilm(), device="cpu").embed_sentences(sentences)
    assert 4 < max(np.abs(e[1:]).max() for e in expected) < 10  # LSTM layers reach ~6
    got = Embedder(large_activation_bilm(), quantize="int8").embed_sentences(sentences)
    errors = mean_relative_errors(got, expected)
    assert (errors > 0).all() and errors.max() < 0.02, errors
    every = Embedder(_every_product_in_int8(large_activation_bilm()), device="cpu")
    assert mean_relative_errors(every.embed_sentences(sentences), expected).max() > 0.02


def test_quantized_model_drops_fp32_weights_and_has_its_own_identity():
    fp32_identity = model_identity(random_bilm(seed=5))
    bilm = random_bilm(seed=5).quantize_("int8")
    assert bilm.quantization == "int8"
    layer = bilm.lstm.layers[0]
    assert not hasattr(layer, "state_weight") and layer.int8["state"].weight.dtype == torch.int8
    assert set(layer.int8) == {"input", "state"} and layer.proj_weight.dtype == torch.float32
    encoder = bilm.token_encoder
    assert isinstance(encoder.highways[0].gate, Int8Linear)
    assert isinstance(encoder.projection, torch.nn.Linear)  # the projections stay fp32
    assert model_identity(bilm) != fp32_identity
    assert model_identity(random_bilm(seed=5)) == fp32_identity
    assert bilm.quantize_("int8") is bilm  # quantizing twice is a no-op


def test_int8_model_refuses_training():
    bilm = random_bilm(seed=5).quantize_("int8")
    ids = torch.ones(1, 3, 50, dtype=torch.long)
    with pytest.raises(ElmoError, match="inference only"):
        bilm(ids)
    with torch.no_grad():
        assert bilm(ids).layers.shape == (3, 1, 3, 32)


def test_embedder_from_pretrained_and_cli_option(tmp_path):
    model_dir = save_pretrained(random_bilm(seed=11), tmp_path / "model")
    expected = Embedder.from_pretrained(model_dir).embed_sentences(SENTENCES)
    embedder = Embedder.from_pretrained(model_dir, quantize="int8")
    assert embedder.model.quantization == "int8"
    got = embedder.embed_sentences(SENTENCES)
    assert (mean_relative_errors(got, expected) < TOLERANCE).all()

    src = tmp_path / "in.txt"
    src.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(model_dir), str(src), str(out), "--quiet",
                 "--quantize", "int8"]) == 0
    with h5py.File(out, "r") as f:
        from_cli = [f[str(i)][()] for i in range(len(SENTENCES))]
    for a, b in zip(from_cli, got, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_frozen_elmo_option(tmp_path):
    model_dir = save_pretrained(random_bilm(seed=11), tmp_path / "model")
    elmo = Elmo.from_pretrained(model_dir, 1, dropout=0.0, quantize="int8")
    assert elmo.bilm.quantization == "int8"
    reference = Elmo(None, None, 1, dropout=0.0, module=random_bilm(seed=11))
    ids = batch_to_ids(SENTENCES)
    # A task model trains the mixes with autograd on; the frozen int8 biLM runs without it.
    got = elmo(ids)["elmo_representations"][0]
    expected = reference(ids)["elmo_representations"][0]
    assert got.requires_grad  # the mix's parameters still train
    assert ((got - expected).norm() / expected.norm()).item() < TOLERANCE
    with pytest.raises(ElmoError, match="cannot be fine-tuned"):
        Elmo(None, None, 1, requires_grad=True, module=random_bilm(), quantize="int8")


def test_unknown_mode_and_gpu_are_clear_errors():
    with pytest.raises(ElmoError, match="quantize must be one of"):
        Embedder(random_bilm(), quantize="int4")
    with pytest.raises(ElmoError, match="CPU only"):
        quantize.check_quantize("int8", "cuda")


def test_platform_without_kernels_is_a_clear_error(tmp_path, monkeypatch, capsys):
    quantize.int8_unavailable_reason.cache_clear()
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    monkeypatch.setattr(quantize.platform, "machine", lambda: "aarch64")
    try:
        with pytest.raises(ElmoError, match="AVX2 or AVX-512; this one is aarch64") as err:
            Embedder.from_pretrained(tmp_path / "never-loaded", quantize="int8")
        assert "without --quantize" in str(err.value)
        src = tmp_path / "in.txt"
        src.write_text("a b\n", encoding="utf-8")
        model_dir = save_pretrained(random_bilm(), tmp_path / "model")
        assert main(["embed", str(model_dir), str(src), str(tmp_path / "o.hdf5"),
                     "--quantize", "int8"]) == 1
        message = capsys.readouterr().err
        assert "int8 inference is not available here" in message and "Traceback" not in message
        assert not (tmp_path / "o.hdf5").exists()
    finally:
        quantize.int8_unavailable_reason.cache_clear()


def test_analyze_runs_on_int8_features(tmp_path, monkeypatch, capsys):
    from elmo.cli import analyze
    seen = []
    original = Embedder.from_pretrained.__func__

    def spy(cls, *args, **kwargs):
        embedder = original(cls, *args, **kwargs)
        seen.append(embedder.model.quantization)
        return embedder

    monkeypatch.setattr(analyze.Embedder, "from_pretrained", classmethod(spy))
    model = save_pretrained(random_bilm(seed=6), tmp_path / "model")
    data = tmp_path / "toy.conllu"
    data.write_text(CONLLU, encoding="utf-8")
    assert main(["analyze", "probe", "--model", str(model), "--train", str(data), "--test",
                 str(data), "--quiet", "--json", "--quantize", "int8"]) == 0
    assert seen == ["int8"]
    assert "average" in capsys.readouterr().out


def test_task_run_evaluated_on_int8_features(tmp_path, capsys):
    """`elmo task evaluate --quantize int8`: the run's model over an int8 biLM's features,
    cached apart from the fp32 ones; close to the fp32 score on a model that learned."""
    model_dir = save_pretrained(random_bilm(seed=3), tmp_path / "bilm")
    assert main(task_args("tagging", tmp_path, str(model_dir), epochs=6)) == 0
    scores = {}
    for mode in ("fp32", "int8"):
        capsys.readouterr()
        extra = [] if mode == "fp32" else ["--quantize", "int8"]
        assert main(["task", "evaluate", str(tmp_path / "run"), "--test", str(tmp_path / "test"),
                     "--cache-dir", str(tmp_path / "cache"), "--json", "--quiet", *extra]) == 0
        scores[mode] = json.loads(capsys.readouterr().out)["score"]
    assert scores["fp32"] > 50 and abs(scores["int8"] - scores["fp32"]) <= 10
    assert len({p.name for p in (tmp_path / "cache").rglob("*.hdf5")}) >= 2  # fp32 and int8
    with pytest.raises(ElmoError, match="cannot be combined with --fine-tune"):
        TaskConfig(task="tagging", train="t", dev="d", out="o", format="conll", elmo=str(model_dir),
                   fine_tune=True, quantize="int8")


@pytest.mark.filterwarnings("ignore:int8 products run here")
@pytest.mark.parametrize("name", ["onednn", "fbgemm-no-vnni", "onednn-no-vnni"])
def test_int8_kernels_agree_with_the_exact_product(name, monkeypatch):
    """Each kernel against the exact 8-bit integer products on the same vectors: equal where
    it sums the same 8-bit integers, within 1.5% where the input and state products take 7
    bits (no VNNI)."""
    _kernel(name)
    monkeypatch.setenv(quantize.KERNEL_ENV, name)
    embedder = Embedder(random_bilm(seed=6), quantize="int8")
    got = embedder.embed_sentences(SENTENCES)
    assert embedder.model.lstm.layers[0].int8["state"].__dict__["_int8_operands"][0].name == name
    use_exact_int8(monkeypatch)
    exact = Embedder(random_bilm(seed=6), quantize="int8").embed_sentences(SENTENCES)
    if not quantize.INT8_KERNELS[name].saturating:
        for a, b in zip(got, exact, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    else:
        assert (mean_relative_errors(got, exact) < 0.015).all()
        # The char-CNN's products keep 8 bits: layer 0 is the exact one's.
        for a, b in zip(got, exact, strict=True):
            np.testing.assert_allclose(a[0], b[0], atol=1e-5, rtol=0)


def test_int8_kernel_choice(monkeypatch):
    """The first kernel that sums exactly here; a VNNI CPU's "onednn" only where it has VNNI;
    `ELMO_INT8_KERNEL` forces one, refused where it would not be exact."""
    monkeypatch.delenv(quantize.KERNEL_ENV, raising=False)
    chosen = quantize.choose_int8_kernel()
    assert chosen == next(k for k in quantize.INT8_KERNELS.values() if k.runs_here())
    if not torch.cpu._is_vnni_supported():
        assert not quantize.INT8_KERNELS["onednn"].runs_here()  # its pair sums saturate
        assert chosen.saturating or chosen.name == "int_mm"
    if quantize.INT8_KERNELS["int_mm"].runs_here():  # not where oneDNN is held to AVX2
        monkeypatch.setenv(quantize.KERNEL_ENV, "int_mm")
        assert quantize.choose_int8_kernel().name == "int_mm"
    use_exact_int8(monkeypatch)
    assert quantize.choose_int8_kernel().name == "exact"
    monkeypatch.setenv(quantize.KERNEL_ENV, "int4")
    with pytest.raises(ElmoError, match="not an int8 kernel"):
        quantize.choose_int8_kernel()
    if not quantize.INT8_KERNELS["onednn"].runs_here():
        monkeypatch.setenv(quantize.KERNEL_ENV, "onednn")
        with pytest.raises(ElmoError, match="does not run exactly"):
            quantize.choose_int8_kernel()
    monkeypatch.setenv(quantize.KERNEL_ENV, "fbgemm-no-vnni")
    monkeypatch.setenv("ELMO_ONEDNN", "0")
    assert quantize.choose_int8_kernel().name == "fbgemm-no-vnni"  # fbgemm is not oneDNN
    monkeypatch.delenv(quantize.KERNEL_ENV)
    monkeypatch.setattr(quantize, "INT8_KERNELS", {"onednn": quantize.INT8_KERNELS["onednn"]})
    monkeypatch.setenv("ELMO_ONEDNN", "0")  # none left that sums exactly
    with pytest.raises(ElmoError, match="no int8 kernel sums exactly.*fp32"):
        quantize.choose_int8_kernel()


def test_saving_an_int8_model_is_refused_with_the_fix(tmp_path):
    from elmo.loading.formats import save_bilm_tf

    model = random_bilm(seed=8).quantize_("int8")
    for save in (save_pretrained, save_bilm_tf):
        with pytest.raises(ElmoError, match="cannot be saved.*without quantize="):
            save(model, tmp_path / save.__name__)
        assert not (tmp_path / save.__name__).exists()


@pytest.mark.parametrize("kernel", ["fbgemm-no-vnni", "int_mm"])
@pytest.mark.parametrize("vnni", [False, True])
def test_int8_warns_only_where_the_generic_kernel_runs_without_vnni(monkeypatch, recwarn, vnni,
                                                                    kernel):
    _kernel(kernel)
    monkeypatch.setenv(quantize.KERNEL_ENV, kernel)
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: vnni)
    random_bilm().quantize_("int8")
    slow = [w for w in recwarn if "generic kernel" in str(w.message)]
    assert len(slow) == (1 if kernel == "int_mm" and not vnni else 0)
    if slow:
        assert "fp32 is faster here" in str(slow[0].message)
