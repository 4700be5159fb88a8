"""The ONNX export (elmo.onnx): ONNX Runtime's layers equal ours (and TensorFlow's)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from elmo import Embedder, load_bilm_tf, load_model
from elmo.cli import main
from elmo.config import BiLMConfig
from elmo.errors import ElmoError
from elmo.layer_choice import select_layers
from elmo.modules.bilm import BiLM
from elmo.onnx import export_onnx, onnx_inputs
from elmo.onnx.graph import bilm_graph
from tests.conftest import REPO, random_bilm, require_shared
from tests.helpers.model_files import FIXTURES

ATOL = 1e-5
NODE_EXAMPLE = REPO / "examples" / "onnx-node"
SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."], ["Hello"],
             "A somewhat longer sentence , with punctuation ; and ünïcödé words !".split(),
             ["Two", "words"]]


def session(model: onnx.ModelProto) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def onnx_layers(sess: onnxruntime.InferenceSession, bilm: BiLM, sentences) -> list[np.ndarray]:
    """Per sentence (L+1, n, 2P) from one ONNX Runtime call on the padded batch."""
    out = sess.run(None, onnx_inputs(bilm, sentences))[0]  # (L+1, B, T, 2P)
    for b, s in enumerate(sentences):
        assert not out[:, b, len(s):].any(), "padding must be zero"
    return [out[:, b, : len(s)] for b, s in enumerate(sentences)]


def our_layers(bilm: BiLM, sentences) -> list[np.ndarray]:
    with torch.inference_mode():
        out = bilm(bilm.batch_to_ids(sentences)).layers.numpy()
    return [out[:, b, : len(s)] for b, s in enumerate(sentences)]


def max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    assert [x.shape for x in a] == [y.shape for y in b]
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True) if x.size)


@pytest.fixture(scope="module")
def default_model() -> tuple[BiLM, onnxruntime.InferenceSession]:
    bilm = load_model("default").bilm
    return bilm, session(bilm_graph(bilm))


# ---- the graph -------------------------------------------------------------------------


def test_the_graph_passes_the_checker_and_strict_shape_inference():
    model = bilm_graph(random_bilm())
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    (output,) = inferred.graph.output
    dims = [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim]
    assert dims == [3, "batch", "tokens", 32]
    assert {n.op_type for n in model.graph.node} >= {"Scan", "Unique", "Conv"}
    body = next(n for n in model.graph.node if n.op_type == "Scan").attribute[0].g
    assert {n.op_type for n in body.node} >= {"MatMul", "Sigmoid", "Tanh", "Clip"}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_bilm_tf_fixtures_equal_ours_and_tensorflows(name):
    folder, sentences_file, _, _ = FIXTURES[name]
    root = require_shared("fixtures", "bilm-tf", folder)
    bilm = load_bilm_tf(root / "options.json", root / "lm_weights.hdf5")
    sentences = json.loads((root / sentences_file).read_text())
    batch = [sentences[k][0].split() for k in range(3)]  # TF's first batch: no carried state
    got = onnx_layers(session(bilm_graph(bilm)), bilm, batch)
    assert max_diff(got, our_layers(bilm, batch)) < ATOL
    for k, layers in enumerate(got):
        with h5py.File(root / f"lm_embeddings_{k}.hdf5", "r") as tf:
            forward, backward = tf["0"][...]  # TF's top layer of sentence k, batch 0
        np.testing.assert_allclose(layers[-1], np.concatenate([forward, backward], -1),
                                   atol=ATOL, rtol=ATOL)


def test_default_model_mixed_lengths_equal_the_embedder(default_model):
    bilm, sess = default_model
    expected = Embedder(bilm, device="cpu").embed_sentences(SENTENCES)
    assert max_diff(onnx_layers(sess, bilm, SENTENCES), expected) < ATOL


def test_a_sentence_alone_equals_its_row_in_a_padded_batch(default_model):
    """Stateless: no padding leaks, the backward direction starts at each sentence's end."""
    bilm, sess = default_model
    batch = onnx_layers(sess, bilm, SENTENCES)
    for sentence, layers in zip(SENTENCES, batch, strict=True):
        assert max_diff(onnx_layers(sess, bilm, [sentence]), [layers]) < ATOL


def test_one_token_and_empty_sentences(default_model):
    bilm, sess = default_model
    sentences = [["word"], [], ["two", "tokens"]]
    assert max_diff(onnx_layers(sess, bilm, sentences), our_layers(bilm, sentences)) < ATOL


def test_original_sized_random_weights():
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig.preset("original")).eval()
    with torch.no_grad():
        for name, p in bilm.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
    sentences = [SENTENCES[0], SENTENCES[1]]
    got = onnx_layers(session(bilm_graph(bilm)), bilm, sentences)
    assert max_diff(got, our_layers(bilm, sentences)) < ATOL


def test_a_2000_token_sentence():
    bilm = random_bilm(3)
    words = ["the", "a", "cat", "dog", "sat", "ran", ".", ",", "über", "x" * 40]
    rng = random.Random(0)
    sentences = [[rng.choice(words) for _ in range(2000)], ["short", "one"]]
    got = onnx_layers(session(bilm_graph(bilm)), bilm, sentences)
    assert max_diff(got, our_layers(bilm, sentences)) < ATOL


@pytest.mark.parametrize("layers", ["top", "average", "sum", 0, 1])
def test_one_output_of_the_layers(layers):
    bilm = random_bilm(1)
    sess = session(bilm_graph(bilm, layers))
    assert [o.name for o in sess.get_outputs()] == ["embeddings"]
    out = sess.run(None, onnx_inputs(bilm, SENTENCES))[0]  # (B, T, 2P)
    for b, layers_b in enumerate(our_layers(bilm, SENTENCES)):
        mode = layers if isinstance(layers, str) else "all"
        expected = select_layers(layers_b, mode)
        expected = expected[layers] if isinstance(layers, int) else expected
        np.testing.assert_allclose(out[b, : len(SENTENCES[b])], expected, atol=ATOL)


def test_a_vocabulary_model_takes_its_own_ids():
    """ELMoForManyLangs: the graph reads the ids `bilm.batch_to_ids` makes from its vocabulary."""
    root = require_shared("fixtures", "efml")
    bilm = load_model(root / "model_a").bilm
    expected = np.load(root / "expected_a.npz")
    lines = (root / "sentences.txt").read_text(encoding="utf-8").splitlines()
    sentences = [line.split(" ") for line in lines]
    got = onnx_layers(session(bilm_graph(bilm)), bilm, sentences)
    assert max_diff(got, [expected[str(i)] for i in range(len(sentences))]) < ATOL


# ---- the file and the command -----------------------------------------------------------


def test_export_writes_a_file_and_refuses_to_replace_it(tmp_path):
    bilm = random_bilm()
    path = export_onnx(bilm, tmp_path / "tiny.onnx")
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert max_diff(onnx_layers(sess, bilm, SENTENCES), our_layers(bilm, SENTENCES)) < ATOL
    with pytest.raises(ElmoError, match="already exists"):
        export_onnx(bilm, path)
    export_onnx(bilm, path, overwrite=True, layers="top")
    assert [o.name for o in onnx.load(path).graph.output] == ["embeddings"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_export_refuses_an_int8_model_and_an_unknown_layer(tmp_path):
    with pytest.raises(ElmoError, match="the model has layers 0 to 2"):
        export_onnx(random_bilm(), tmp_path / "m.onnx", layers=3)
    with pytest.raises(ElmoError, match="layers must be one of"):
        export_onnx(random_bilm(), tmp_path / "m.onnx", layers="middle")
    with pytest.raises(ElmoError, match="quantized"):
        export_onnx(random_bilm().quantize_("int8"), tmp_path / "m.onnx")
    assert not list(tmp_path.iterdir())


def test_elmo_export_writes_onnx_by_suffix_or_format(tmp_path, capsys):
    assert main(["export", "default", str(tmp_path / "d.onnx"), "--layers", "average"]) == 0
    assert [o.name for o in onnx.load(tmp_path / "d.onnx").graph.output] == ["embeddings"]
    assert capsys.readouterr().err == (f"wrote onnx (OUTDIR ends in .onnx; --format bilm-tf or "
                                       f"native for another): {tmp_path / 'd.onnx'}\n")
    assert main(["export", "default", str(tmp_path / "out"), "--format", "onnx"]) == 0
    assert (tmp_path / "out" / "model.onnx").is_file()
    assert capsys.readouterr().err == f"wrote onnx: {tmp_path / 'out' / 'model.onnx'}\n"
    assert main(["export", "default", str(tmp_path / "d.onnx")]) == 1
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", "default", str(tmp_path / "tf"), "--layers", "top"])


# ---- outside Python ----------------------------------------------------------------------


def test_the_node_example_prints_the_embedders_vectors(tmp_path):
    """examples/onnx-node/embed.js makes the character ids itself (docs/deployment.md)."""
    node = shutil.which("node")
    modules = Path(os.environ.get("ELMO_NODE_MODULES", NODE_EXAMPLE / "node_modules"))
    if node is None or not (modules / "onnxruntime-node").is_dir():
        pytest.skip("needs Node.js and onnxruntime-node: run `ONNXRUNTIME_NODE_INSTALL_CUDA=skip "
                    "npm install` in examples/onnx-node (or set ELMO_NODE_MODULES to a "
                    "node_modules holding it)")
    bilm = random_bilm()
    path = export_onnx(bilm, tmp_path / "tiny.onnx")
    # tokens are split on runs of whitespace, as str.split() does
    lines = ["The cat  sat on\tthe mat . ", " Hi", "ünïcödé <S> 日本語 " + "y" * 60]
    run = subprocess.run([node, str(NODE_EXAMPLE / "embed.js"), str(path), *lines],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "NODE_PATH": str(modules)})
    got = [np.array(layers, dtype=np.float32) for layers in json.loads(run.stdout)["layers"]]
    expected = Embedder(bilm, device="cpu").embed_sentences([s.split() for s in lines])
    assert max_diff(got, expected) < ATOL
