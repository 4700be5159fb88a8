"""int8 inference: the kernels' arithmetic, closeness to fp32, every entry point, clear errors.

Tolerance: weights and each activation row are rounded to 8 bits with their own scale, an error
of at most half a step (max |v| / 254) per element, about 0.2% of the row's largest value on
average. It compounds through the char-CNN, two LSTM layers and their recurrence: on the tiny
random model the mean relative error per layer measures 0.6-0.9% (and ~1% on the shipped
model, docs/speed.md). We require < 3% per layer, and that int8 did run (error > 0).
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
from elmo.modules.quantize import Int8Linear, int8_matmul, quantize_columns
from elmo.tasks.config import TaskConfig
from tests.conftest import random_bilm
from tests.helpers.tasks import CONLLU, task_args

SENTENCES = [["the", "cat", "sat", "on", "the", "mat", "."], ["北京", "欢迎", "你"], ["a"],
             ["bank", "of", "the", "river", ",", "money", "in", "the", "bank"] * 3]
TOLERANCE = 0.03  # mean relative error per layer, see the module docstring


def mean_relative_errors(got: list[np.ndarray], expected: list[np.ndarray]) -> np.ndarray:
    """Per layer: mean |got - expected| / mean |expected| over all sentences' tokens."""
    diff = np.concatenate([np.abs(g - e) for g, e in zip(got, expected, strict=True)], axis=1)
    size = np.concatenate([np.abs(e) for e in expected], axis=1)
    return diff.mean(axis=(1, 2)) / size.mean(axis=(1, 2))


def _packer(kernel: str):
    """weight (K, N) or (D, K, N) int8 -> the `packed` argument of int8_matmul."""
    if kernel == "int_mm":
        return lambda w: None
    if not quantize._u8s8_kernel_works():
        pytest.skip("oneDNN's u8s8 kernel needs VNNI, which this CPU lacks")
    return lambda w: [quantize._u8s8_pack(m) for m in w.view(-1, *w.shape[-2:])]


@pytest.mark.parametrize("kernel", ["int_mm", "onednn"])
def test_int8_matmul_is_the_product_of_the_dequantized_operands(kernel):
    pack = _packer(kernel)
    torch.manual_seed(0)
    x, w, add = torch.randn(37, 70), torch.randn(70, 90), torch.randn(37, 90)
    w_int8, w_scale = quantize_columns(w)
    x_scale = x.abs().amax(1, keepdim=True) / 127
    x_int8 = torch.round(x / x_scale)
    expected = (x_int8.double() * x_scale) @ (w_int8.double() * w_scale) + add
    got = int8_matmul(x, w_int8, w_scale, add, packed=pack(w_int8))
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    assert (w_int8.abs() <= 127).all() and w_int8.dtype == torch.int8
    # ... and close to the fp32 product: each operand is rounded to 8 bits.
    error = ((got - (x @ w + add)).norm() / (x @ w).norm()).item()
    assert 0 < error < 0.02
    # Batched over a leading axis (the LSTM's directions), written into its addend.
    xs, ws = torch.stack([x, -2 * x]), torch.stack([w, w.flip(0)])
    ws_int8, ws_scale = quantize_columns(ws)
    batched = int8_matmul(xs, ws_int8, ws_scale, add.expand(2, -1, -1).clone(),
                          packed=pack(ws_int8))
    for k in range(2):
        torch.testing.assert_close(batched[k], int8_matmul(xs[k], ws_int8[k], ws_scale[k], add,
                                                           packed=pack(ws_int8[k])))
    into = add.expand(2, -1, -1).clone()
    assert int8_matmul(xs, ws_int8, ws_scale, into, out=into, packed=pack(ws_int8)) is into
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


def test_quantized_model_drops_fp32_weights_and_has_its_own_identity():
    fp32_identity = model_identity(random_bilm(seed=5))
    bilm = random_bilm(seed=5).quantize_("int8")
    assert bilm.quantization == "int8"
    layer = bilm.lstm.layers[0]
    assert not hasattr(layer, "state_weight") and layer.int8["state"].weight.dtype == torch.int8
    assert isinstance(bilm.token_encoder.projection, Int8Linear)
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


def test_int8_kernels_agree(monkeypatch):
    """oneDNN's u8s8 kernel and torch._int_mm sum the same integers: the vectors differ only
    by the order of the float rescaling."""
    if not quantize._u8s8_kernel_works():
        pytest.skip("oneDNN's u8s8 kernel needs VNNI, which this CPU lacks")
    embedder = Embedder(random_bilm(seed=6), quantize="int8")
    onednn = embedder.embed_sentences(SENTENCES)
    assert "_u8s8" in embedder.model.lstm.layers[0].int8["state"].__dict__  # the path ran
    monkeypatch.setenv("ELMO_ONEDNN", "0")
    int_mm = Embedder(random_bilm(seed=6), quantize="int8").embed_sentences(SENTENCES)
    for a, b in zip(onednn, int_mm, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_saving_an_int8_model_is_refused_with_the_fix(tmp_path):
    from elmo.loading.formats import save_bilm_tf

    model = random_bilm(seed=8).quantize_("int8")
    for save in (save_pretrained, save_bilm_tf):
        with pytest.raises(ElmoError, match="cannot be saved.*without quantize="):
            save(model, tmp_path / save.__name__)
        assert not (tmp_path / save.__name__).exists()


@pytest.mark.parametrize("vnni", [False, True])
def test_int8_without_vnni_says_it_is_slower_than_fp32(monkeypatch, recwarn, vnni):
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: vnni)
    random_bilm().quantize_("int8")
    slow = [w for w in recwarn if "no VNNI" in str(w.message)]
    assert len(slow) == (0 if vnni else 1)
    if not vnni:
        assert "fp32 is faster here" in str(slow[0].message)
