"""A layer choice is one record in `LAYER_CHOICES`: every record gives in ONNX what it gives
in numpy, and a throwaway record added there reaches `elmo embed --layers`, the Embedder,
`elmo export --layers` (ONNX), the spaCy pipe, flair, simple_elmo and `elmo.ray.Embed`."""

from __future__ import annotations

import json
from dataclasses import dataclass

import h5py
import numpy as np
import pytest
import torch

from elmo import layer_choice, save_pretrained
from elmo.cli import main
from elmo.embed import Embedder, EmbedSettings
from elmo.errors import ElmoError
from elmo.layer_choice import (
    LAYER_CHOICES,
    AllLayers,
    LayerAverage,
    LayerChoice,
    LayerChoiceError,
    LayersSideBySide,
    LayerSum,
    LearnedMix,
    OneLayer,
    TopLayer,
    parse_layer_choice,
    token_vectors_choice,
)
from elmo.modules.scalar_mix import ScalarMix
from tests.conftest import random_bilm

LINES = ["the cat sat on the mat .", "a", "bank of the river"]
SENTENCES = [line.split() for line in LINES]
MIX = [0.5, 0.25, 0.25]


@dataclass(frozen=True)
class LayerMax(LayerChoice):
    """A toy kind: each value's largest over the layers."""

    form, help = "max", "each value's largest over the layers, (n, D)"

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        return layers.max(axis=0)

    def onnx(self, g, layers: str, n_layers: int) -> str:
        return g.op("ReduceMax", layers, g.const([0]), keepdims=0)


@pytest.fixture
def run_dir(tmp_path):
    """A task run's directory holding a learned mix of 3 layers."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "layer_weights.json").write_text(json.dumps({"input": MIX}))
    return tmp_path / "run"


def example(kind: type[LayerChoice], run_dir) -> str | int:
    """A spelling of each kind of the table (a new kind adds one here)."""
    return {AllLayers: "all", TopLayer: "top", LayerAverage: "average", LayerSum: "sum",
            LayersSideBySide: "concat", OneLayer: "1", LearnedMix: str(run_dir),
            LayerMax: "max"}[kind]


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(layer_choice, "LAYER_CHOICES", [*LAYER_CHOICES, LayerMax])


@pytest.fixture(scope="module")
def bilm():
    return random_bilm(seed=3)


@pytest.fixture(scope="module")
def layers(bilm) -> list[np.ndarray]:
    return Embedder(bilm, device="cpu").embed_sentences(SENTENCES)


# ---- the records ----------------------------------------------------------------------------

def test_each_kind_parses_its_spellings_and_no_other(run_dir):
    assert [parse_layer_choice(s) for s in ("all", "top", "average", "sum", "concat")] == [
        AllLayers(), TopLayer(), LayerAverage(), LayerSum(), LayersSideBySide()]
    assert parse_layer_choice(2) == parse_layer_choice("2") == parse_layer_choice("layer:2") \
        == OneLayer(2)
    assert parse_layer_choice(str(run_dir)) == parse_layer_choice(
        str(run_dir / "layer_weights.json")) == LearnedMix(tuple(MIX), str(run_dir))
    for wrong in ("middle", "layer:x", "-1", "", True):
        with pytest.raises(ElmoError, match="layers must be one of all, top, average, sum"):
            parse_layer_choice(wrong)
    with pytest.raises(ElmoError, match="layers: no such file or directory: '.*missing'"):
        parse_layer_choice(str(run_dir / "missing"))


def test_a_choice_checks_the_model_it_is_applied_to(run_dir):
    with pytest.raises(ElmoError, match="layers=3: the model has layers 0 to 2"):
        OneLayer(3).check(3)
    with pytest.raises(ElmoError, match="its mix weighs 3 layers, but the model has 4"):
        parse_layer_choice(str(run_dir)).check(4)
    for kind in (AllLayers, TopLayer, LayerAverage, LayerSum, LayersSideBySide):
        kind().check(3)


def test_numpy_gives_what_each_kind_says(layers, run_dir):
    h = layers[0]  # (3, 7, D)
    want = {"all": h, "top": h[2], "average": h.mean(axis=0), "sum": h.sum(axis=0),
            "concat": np.concatenate(list(h), axis=-1), "1": h[1],
            str(run_dir): 0.5 * h[0] + 0.25 * (h[1] + h[2])}
    for spelling, expected in want.items():
        choice = parse_layer_choice(spelling)
        got = choice.numpy(h)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
        assert got.shape == choice.shape(3, h.shape[1], h.shape[2])
        empty = choice.numpy(h[:, :0])  # an empty line's sentence: 0 tokens
        assert empty.shape == choice.shape(3, 0, h.shape[2])


@pytest.mark.parametrize("kind", [*LAYER_CHOICES, LayerMax])
def test_each_kind_builds_in_onnx_what_it_gives_in_numpy(kind, bilm, run_dir):
    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from elmo.onnx import onnx_inputs
    from elmo.onnx.graph import ALL_OUTPUT, MIX_OUTPUT, bilm_graph

    choice = parse_layer_choice(example(kind, run_dir)) if kind is not LayerMax else LayerMax()
    graph = bilm_graph(bilm, choice)
    session = onnxruntime.InferenceSession(graph.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    out = session.run(None, onnx_inputs(bilm, SENTENCES))[0]
    assert graph.graph.output[0].name == (ALL_OUTPUT if choice.stacked else MIX_OUTPUT)
    with torch.inference_mode():
        ours = bilm(bilm.batch_to_ids(SENTENCES)).layers.numpy()  # (L+1, B, T, D)
    for b, sentence in enumerate(SENTENCES):
        got = out[:, b, :len(sentence)] if choice.stacked else out[b, :len(sentence)]
        np.testing.assert_allclose(got, choice.numpy(ours[:, b, :len(sentence)]), atol=1e-5)


def test_flair_and_spacy_spell_all_as_the_layers_side_by_side():
    assert token_vectors_choice("all", "layers") == LayersSideBySide()
    assert token_vectors_choice(1, "layers") == OneLayer(1)
    with pytest.raises(ElmoError, match="embedding_mode must be one of"):
        token_vectors_choice("middle", "embedding_mode")


def test_scalar_mix_takes_the_choices_it_computes():
    h = torch.randn(3, 2, 4, 5)
    assert ScalarMix(3, mode="top").layer == ScalarMix(3, mode="layer:2").layer == 2
    assert ScalarMix(3, mode="1").layer == 1
    torch.testing.assert_close(ScalarMix(3, mode="average")(h), h.mean(dim=0))
    for wrong in ("sum", "concat", "all", "max"):
        with pytest.raises(ValueError, match="mix mode must be one of learned, average"):
            ScalarMix(3, mode=wrong)


def test_a_learned_mix_is_identified_by_its_weights(run_dir):
    settings = EmbedSettings(layers=str(run_dir))
    assert settings.layer_choice.spelling() == json.dumps(MIX)
    assert EmbedSettings(layers="top").layer_choice.spelling() == "top"


# ---- a toy record reaches every consumer ----------------------------------------------------

def test_a_toy_choice_reaches_elmo_embed_and_the_embedder(toy, tmp_path, bilm, layers):
    model = save_pretrained(bilm, tmp_path / "model")
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert main(["embed", str(model), str(tmp_path / "in.txt"), str(tmp_path / "cli.hdf5"),
                 "--layers", "max", "--quiet", "--device", "cpu"]) == 0
    Embedder(bilm, device="cpu").embed_file(tmp_path / "in.txt", tmp_path / "api.hdf5",
                                            layers="max", progress=False)
    for name in ("cli.hdf5", "api.hdf5"):
        with h5py.File(tmp_path / name) as f:
            for i, expected in enumerate(layers):
                np.testing.assert_allclose(f[str(i)][()], expected.max(axis=0), atol=1e-6)


def test_a_toy_choice_is_refused_by_elmo_embed_without_it(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["embed", "default", "in.txt", "out.hdf5", "--layers", "max"])
    assert "layers must be one of" in capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["mix.json", "runs/ner"])
def test_a_missing_run_is_named_as_a_missing_file(tmp_path, capsys, spelling):
    with pytest.raises(SystemExit):
        main(["embed", "default", "in.txt", "out.hdf5", "--layers", spelling])
    assert (f"layers: no such file or directory: {spelling!r} (a RUN is a task run's "
            "layer_weights.json or its directory)") in capsys.readouterr().err
    with pytest.raises(LayerChoiceError, match="layers must be one of all, top"):
        parse_layer_choice("tpo")  # a word is no path: the forms are listed


def test_a_toy_choice_reaches_the_onnx_export(toy, tmp_path, bilm):
    onnx = pytest.importorskip("onnx")
    save_pretrained(bilm, tmp_path / "model")
    assert main(["export", str(tmp_path / "model"), str(tmp_path / "m.onnx"),
                 "--layers", "max"]) == 0
    output = onnx.load(tmp_path / "m.onnx").graph.output[0]
    assert output.name == "embeddings"
    assert [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim] == [
        "batch", "tokens", bilm.config.output_dim]


def test_a_toy_choice_reaches_the_spacy_pipe(toy, tmp_path, bilm, layers):
    spacy = pytest.importorskip("spacy")
    model = save_pretrained(bilm, tmp_path / "model")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(model), "layers": "max", "device": "cpu"})
    for doc, expected in zip(nlp.pipe(LINES), layers, strict=True):
        np.testing.assert_allclose(doc.tensor, expected.max(axis=0), atol=1e-6)


def test_a_toy_choice_reaches_flair(toy, bilm, layers):
    pytest.importorskip("flair")
    from flair.data import Sentence

    from elmo.flair import ELMoEmbeddings

    embeddings = ELMoEmbeddings(embedding_mode="max", bilm=bilm)
    sentences = [Sentence(s) for s in SENTENCES]
    embeddings.embed(sentences)
    for sentence, expected in zip(sentences, layers, strict=True):
        got = np.stack([t.get_embedding().cpu().numpy() for t in sentence])
        np.testing.assert_allclose(got, expected.max(axis=0), atol=1e-6)
    assert embeddings.embedding_length == bilm.config.output_dim


def test_a_toy_choice_reaches_simple_elmo_and_ray(toy, tmp_path, bilm, layers):
    from elmo.simple_elmo import ElmoModel

    model = save_pretrained(bilm, tmp_path / "model")
    simple = ElmoModel()
    simple.load(model, device="cpu")
    vectors = simple.get_elmo_vectors(SENTENCES, layers="max")
    for row, expected in zip(vectors, layers, strict=True):
        np.testing.assert_allclose(row[:expected.shape[1]], expected.max(axis=0), atol=1e-6)

    pytest.importorskip("ray")
    from elmo.ray import Embed

    rows = Embed(model, layers="max", device="cpu")({"text": np.array(LINES)})["embedding"]
    for row, expected in zip(rows, layers, strict=True):
        np.testing.assert_allclose(row, expected.max(axis=0), atol=1e-6)
