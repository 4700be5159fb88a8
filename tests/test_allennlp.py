"""AllenNLP users' idioms on AllenNLP's own test fixture: Elmo, ScalarMix, state dicts in
AllenNLP's layout, ElmoEmbedder and the `allennlp elmo` command line."""

from __future__ import annotations

import io
import json

import h5py
import numpy as np
import pytest
import torch
from torch import nn

from elmo import Elmo, ElmoEmbedder, Embedder, batch_to_ids, save_pretrained
from elmo.cli import main
from elmo.errors import ElmoError
from elmo.modules.bilm import BiLM
from elmo.modules.elmo import MixedBiLM
from elmo.tasks.model import TaskModel
from tests.conftest import random_bilm, require_shared

SENTENCES = [["The", "cat", "sat", "down", "."], ["Dogs", "bark"], ["ELMo", "helps"]]


@pytest.fixture
def fixture():
    """AllenNLP's fixture model: (options, weights, its 3 x 10 sentences, expected files)."""
    root = require_shared("fixtures", "bilm-tf", "allennlp_test_fixtures_elmo")
    sentences = json.loads((root / "sentences.json").read_text())
    return root / "options.json", root / "lm_weights.hdf5", sentences, root


def expected_top(root, k: int, i: int) -> np.ndarray:
    """The fixture's top layer of sentences[k][i] (n, 32), from the stateful TF run."""
    with h5py.File(root / f"lm_embeddings_{k}.hdf5", "r") as f:
        data = f[str(i)][...]
    return np.concatenate([data[0], data[1]], axis=-1)


def hand_mix(layers: torch.Tensor, s: list[float], gamma: float = 1.0) -> torch.Tensor:
    w = torch.softmax(torch.tensor(s), 0)
    return gamma * (w[:, None, None, None] * layers).sum(0)


# ---- Elmo ---------------------------------------------------------------------------------

def test_constructor_positionally_and_by_keyword_and_the_call(fixture):
    options, weights, _, _ = fixture
    positional = Elmo(str(options), str(weights), 2, False, False, 0.0, None, False, None, None)
    keywords = Elmo(options_file=str(options), weight_file=str(weights),
                    num_output_representations=2, requires_grad=False, do_layer_norm=False,
                    dropout=0.0, vocab_to_cache=None, keep_sentence_boundaries=False,
                    scalar_mix_parameters=None, module=None)
    assert positional.get_output_dim() == keywords.get_output_dim() == 32
    ids = batch_to_ids(SENTENCES)
    a, b = positional(inputs=ids), keywords(ids, None)
    assert len(a["elmo_representations"]) == 2
    assert a["elmo_representations"][0].shape == (3, 5, 32)
    assert a["mask"].tolist() == [[True] * 5, [True] * 2 + [False] * 3, [True] * 2 + [False] * 3]
    torch.testing.assert_close(a["elmo_representations"][1], b["elmo_representations"][1])
    layers = positional.bilm(ids).layers
    torch.testing.assert_close(a["elmo_representations"][0], layers.mean(0))


def test_scalar_mix_attributes_and_parameter_list(fixture):
    options, weights, _, _ = fixture
    elmo = Elmo(options, weights, 2, dropout=0.0)
    assert elmo.scalar_mix_0 is not elmo.scalar_mix_1
    assert len(elmo.scalar_mix_1.scalar_parameters) == 3
    assert all(p.shape == (1,) for p in elmo.scalar_mix_1.scalar_parameters)
    with torch.no_grad():
        elmo.scalar_mix_1.scalar_parameters[0].fill_(2.0)
        elmo.scalar_mix_1.gamma.fill_(0.5)
    ids = batch_to_ids(SENTENCES)
    out = elmo(ids)["elmo_representations"][1]
    torch.testing.assert_close(out, hand_mix(elmo.bilm(ids).layers, [2.0, 0.0, 0.0], 0.5))


def test_scalar_mix_parameters_fix_the_weights(fixture):
    options, weights, _, _ = fixture
    elmo = Elmo(options, weights, 1, scalar_mix_parameters=[-9e10, -9e10, 1.0], dropout=0.0)
    assert not any(p.requires_grad for p in elmo.parameters())
    ids = batch_to_ids(SENTENCES)
    torch.testing.assert_close(elmo(ids)["elmo_representations"][0], elmo.bilm(ids).layers[-1])


def test_stateful_reproduces_allennlp_on_all_thirty_sentences(fixture):
    """AllenNLP's Elmo carries the LSTM state from batch to batch, as the fixture's run."""
    options, weights, sentences, root = fixture
    elmo = Elmo(options, weights, 1, dropout=0.0, stateful=True,
                scalar_mix_parameters=[-9e10, -9e10, 1.0])  # the top layer only
    with torch.no_grad():
        for i in range(10):
            batch = [sentences[k][i].split() for k in range(3)]
            out = elmo(batch_to_ids(batch))["elmo_representations"][0]
            for k, tokens in enumerate(batch):
                np.testing.assert_allclose(out[k, : len(tokens)].numpy(),
                                           expected_top(root, k, i), atol=1e-5, rtol=1e-5)


def test_4d_input(fixture):
    """AllenNLP's test_elmo_4D_input: (batch, sentences, timesteps, 50) -> one
    representation per sentence, as if each group were a batch of its own."""
    options, weights, _, _ = fixture
    elmo = Elmo(options, weights, 2, dropout=0.0)
    groups = [[["The", "sentence", "."], ["ELMo", "helps", "disambiguate", "ELMo", "from",
                                          "Elmo", "."]],
              [["1", "2"], ["1", "2", "3", "4", "5", "6", "7"]],
              [["1", "2", "3", "4", "50", "6", "7"], []]]
    ids = torch.zeros(3, 2, 7, 50, dtype=torch.long)
    for b, group in enumerate(groups):
        one = batch_to_ids(group)
        ids[b, :, : one.shape[1]] = one
    out = elmo(ids)
    assert out["mask"].shape == (3, 2, 7)
    assert out["mask"].sum(-1).tolist() == [[3, 7], [2, 7], [7, 0]]
    for rep in out["elmo_representations"]:
        assert rep.shape == (3, 2, 7, 32)
    for b, group in enumerate(groups):
        alone = elmo(batch_to_ids(group))["elmo_representations"][1]
        torch.testing.assert_close(out["elmo_representations"][1][b, :, : alone.shape[1]],
                                   alone, atol=1e-6, rtol=1e-5)


def test_vocab_to_cache_and_word_inputs(fixture):
    options, weights, _, _ = fixture
    vocab = ["@@PADDING@@", "@@UNKNOWN@@", *sorted({w for s in SENTENCES for w in s})]
    word_ids = torch.zeros(3, 5, dtype=torch.long)
    for b, sentence in enumerate(SENTENCES):
        word_ids[b, : len(sentence)] = torch.tensor([vocab.index(w) for w in sentence])
    ids = batch_to_ids(SENTENCES)
    plain = Elmo(options, weights, 1, dropout=0.0, do_layer_norm=True)
    cached = Elmo(options, weights, 1, dropout=0.0, do_layer_norm=True, vocab_to_cache=vocab)
    expected = plain(ids)
    for words in (word_ids, None):  # the cache, then the char-CNN as without it
        got = cached(ids, words)
        assert got["mask"].tolist() == expected["mask"].tolist()
        torch.testing.assert_close(got["elmo_representations"][0],
                                   expected["elmo_representations"][0], atol=1e-5, rtol=1e-5)
    # 3-D word ids come with 4-D character ids
    got = cached(ids.unsqueeze(0), word_ids.unsqueeze(0))["elmo_representations"][0]
    torch.testing.assert_close(got[0], expected["elmo_representations"][0], atol=1e-5, rtol=1e-5)
    # a word id outside the cache: back to the characters, as AllenNLP
    outside = word_ids.clone()
    outside[0, 0] = len(vocab) + 5
    torch.testing.assert_close(cached(ids, outside)["elmo_representations"][0],
                               expected["elmo_representations"][0])
    with pytest.warns(UserWarning, match="without vocab_to_cache"):
        plain(ids, word_ids)


class DictBiLM(nn.Module):
    """A module with AllenNLP's `_ElmoBiLm` interface, over our BiLM."""

    def __init__(self, bilm: BiLM) -> None:
        super().__init__()
        self.bilm, self.num_layers = bilm, bilm.num_layers

    def get_output_dim(self) -> int:
        return self.bilm.config.output_dim

    def forward(self, inputs, word_inputs=None):
        out = self.bilm(inputs, keep_boundaries=True)
        return {"activations": list(out.layers), "mask": out.mask}


@pytest.mark.parametrize("boundaries", [False, True])
def test_module_argument_takes_any_module_returning_activations_and_mask(boundaries):
    bilm = random_bilm()
    theirs = Elmo(None, None, 1, dropout=0.0, do_layer_norm=True, module=DictBiLM(bilm),
                  keep_sentence_boundaries=boundaries)
    ours = Elmo(None, None, 1, dropout=0.0, do_layer_norm=True, module=bilm,
                keep_sentence_boundaries=boundaries)
    assert theirs.get_output_dim() == ours.get_output_dim()
    ids = batch_to_ids(SENTENCES)
    a, b = theirs(ids), ours(ids)
    assert a["mask"].tolist() == b["mask"].tolist()
    torch.testing.assert_close(a["elmo_representations"][0], b["elmo_representations"][0])


# ---- layer norm and dropout: AllenNLP's numbers by default ------------------------------

def layer_normed_average(layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """By hand: each layer minus the mean over mask's positions and dimensions, divided by
    the standard deviation over the same; then the average of the layers."""
    normed = []
    for h in layers.double():
        values = h[mask]  # (positions, D)
        normed.append((h - values.mean()) / torch.sqrt(values.var(unbiased=False) + 1e-12))
    return torch.stack(normed).mean(0).float()


def test_layer_norm_statistics_include_the_sentence_boundaries(fixture):
    options, weights, _, _ = fixture
    ids = batch_to_ids(SENTENCES)
    allennlp = Elmo(options, weights, 1, do_layer_norm=True, dropout=0.0)
    wrapped = allennlp.bilm(ids, keep_boundaries=True)  # (L+1, B, T+2, D): <S> .. </S>
    expected = layer_normed_average(wrapped.layers, wrapped.mask)[:, 1:-1]  # then dropped
    words = wrapped.mask[:, 2:]
    got = allennlp(ids)["elmo_representations"][0]
    torch.testing.assert_close(got[words], expected[words], atol=1e-5, rtol=1e-5)
    assert not got[~words].any()

    bilm_tf = Elmo(options, weights, 1, do_layer_norm=True, dropout=0.0,
                   layer_norm_boundaries=False)
    plain = bilm_tf.bilm(ids)
    expected_tf = layer_normed_average(plain.layers, plain.mask)
    got_tf = bilm_tf(ids)["elmo_representations"][0]
    torch.testing.assert_close(got_tf[words], expected_tf[words], atol=1e-5, rtol=1e-5)
    assert (got - got_tf).abs().max() > 1e-2  # the test can tell the two apart
    # kept boundaries: the same numbers at the words
    kept = Elmo(options, weights, 1, do_layer_norm=True, dropout=0.0,
                keep_sentence_boundaries=True)(ids)
    assert kept["mask"].tolist() == wrapped.mask.tolist()
    torch.testing.assert_close(kept["elmo_representations"][0][:, 1:-1][words], got[words])


def test_fine_tuning_applies_no_bilm_dropout_without_an_options_key(fixture, tmp_path):
    options, weights, _, _ = fixture
    ids = batch_to_ids(SENTENCES)
    elmo = Elmo(options, weights, 1, requires_grad=True, dropout=0.0).train()
    assert elmo.bilm.training and elmo.bilm.config.dropout == 0.0
    a, b = (elmo(ids)["elmo_representations"][0] for _ in range(2))
    torch.testing.assert_close(a, b)
    with_key = json.loads(options.read_text()) | {"dropout": 0.5}
    (tmp_path / "options.json").write_text(json.dumps(with_key))
    dropping = Elmo(tmp_path / "options.json", weights, 1, requires_grad=True, dropout=0.0)
    dropping.train()
    assert not torch.allclose(dropping(ids)["elmo_representations"][0], a)


# ---- state dicts ------------------------------------------------------------------------

def allennlp_state_dict(weights_file, scale: float) -> dict[str, torch.Tensor]:
    """The state dict AllenNLP's `Elmo(options, weights, 1)` has for the fixture with every
    stored tensor multiplied by `scale` (as a fine-tuned model's `weights.th`), built by
    hand from the HDF5 as AllenNLP's loader does: highway gate negated, LSTM gates reordered
    from TensorFlow's i, j, f, o to i, f, j, o, the forget bias of 1 added to the bias."""
    def t(x):
        return torch.tensor(np.asarray(x) * scale, dtype=torch.float32)

    state = {}
    with h5py.File(weights_file, "r") as f:
        emb = "_elmo_lstm._token_embedder."
        char = t(f["char_embed"][...])
        state[emb + "_char_embedding_weights"] = torch.cat([torch.zeros(1, char.shape[1]), char])
        for i in range(5):
            w = t(f[f"CNN/W_cnn_{i}"][...])[0]  # (width, E, count)
            state[f"{emb}char_conv_{i}.weight"] = w.permute(2, 1, 0)
            state[f"{emb}char_conv_{i}.bias"] = t(f[f"CNN/b_cnn_{i}"][...])
        for k in range(2):
            g = f[f"CNN_high_{k}"]
            state[f"{emb}_highways._layers.{k}.weight"] = torch.cat(
                [t(g["W_transform"][...]).T, -t(g["W_carry"][...]).T])
            state[f"{emb}_highways._layers.{k}.bias"] = torch.cat(
                [t(g["b_transform"][...]), -t(g["b_carry"][...])])
        state[emb + "_projection.weight"] = t(f["CNN_proj/W_proj"][...]).T
        state[emb + "_projection.bias"] = t(f["CNN_proj/b_proj"][...])
        for layer in range(2):
            for d, direction in enumerate(("forward", "backward")):
                cell = f[f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"]
                w = t(cell["W_0"][...]).T  # (4C, 16 + 16), TF gate order
                bias = t(cell["B"][...])
                bias[128:192] += 1.0
                order = torch.cat([torch.arange(0, 64), torch.arange(128, 192),
                                   torch.arange(64, 128), torch.arange(192, 256)])
                key = f"_elmo_lstm._elmo_lstm.{direction}_layer_{layer}."
                state[key + "input_linearity.weight"] = w[order, :16]
                state[key + "state_linearity.weight"] = w[order, 16:]
                state[key + "state_linearity.bias"] = bias[order]
                state[key + "state_projection.weight"] = t(cell["W_P_0"][...]).T
    for j, s in enumerate([0.5, -1.0, 2.0]):
        state[f"scalar_mix_0.scalar_parameters.{j}"] = torch.tensor([s])
    state["scalar_mix_0.gamma"] = torch.tensor([1.5])
    return state


def scaled_weights_file(weights_file, scale: float, path):
    def copy(name, obj):
        if isinstance(obj, h5py.Dataset):
            out.create_dataset(name, data=obj[...] * scale)

    with h5py.File(weights_file, "r") as f, h5py.File(path, "w") as out:
        f.visititems(copy)
    return path


def test_state_dict_in_allennlp_layout_loads_and_saves(fixture, tmp_path):
    options, weights, _, _ = fixture
    state = allennlp_state_dict(weights, 1.1)
    torch.save(state, tmp_path / "weights.th")
    elmo = Elmo(options, weights, 1, dropout=0.0)
    elmo.load_state_dict(torch.load(tmp_path / "weights.th", weights_only=True))  # strict

    # the same model read from a weights file scaled the same way, and the same mix
    reference = Elmo(options, scaled_weights_file(weights, 1.1, tmp_path / "w.hdf5"), 1,
                     dropout=0.0)
    ids = batch_to_ids(SENTENCES)
    expected = hand_mix(reference.bilm(ids).layers, [0.5, -1.0, 2.0], 1.5)
    torch.testing.assert_close(elmo(ids)["elmo_representations"][0], expected,
                               atol=1e-5, rtol=1e-5)
    assert (expected - hand_mix(Elmo(options, weights, 1).bilm(ids).layers,
                                [0.5, -1.0, 2.0], 1.5)).abs().max() > 1e-2

    # saved: AllenNLP's keys and tensors
    saved = elmo.state_dict()
    assert sorted(saved) == sorted(state)
    for key, tensor in state.items():
        torch.testing.assert_close(saved[key], tensor, atol=1e-6, rtol=1e-6, msg=key)


def test_state_dict_of_a_model_holding_elmo(fixture):
    """AllenNLP's idiom: a model with Elmo inside, saved and loaded whole."""
    options, weights, _, _ = fixture

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.elmo = Elmo(options, weights, 1, requires_grad=True, dropout=0.0)
            self.out = nn.Linear(self.elmo.get_output_dim(), 4)

    model, copy = Tagger(), Tagger()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.9)
    state = model.state_dict()
    assert "elmo._elmo_lstm._elmo_lstm.forward_layer_1.state_projection.weight" in state
    assert "elmo.scalar_mix_0.scalar_parameters.0" in state
    copy.load_state_dict(state)
    ids = batch_to_ids(SENTENCES)
    torch.testing.assert_close(copy.elmo(ids)["elmo_representations"][0],
                               model.elmo(ids)["elmo_representations"][0])


def test_earlier_layout_of_our_task_runs_loads():
    """A task run saved before (`elmo.mixes.{k}.*`, s as one (L+1,) tensor, `elmo.bilm.*`
    when fine-tuned) loads into today's TaskModel."""
    elmo = MixedBiLM(random_bilm(), 1, requires_grad=True)
    model = TaskModel(nn.Identity(), elmo)
    old = {f"elmo.bilm.{k}": v * 1.5 for k, v in random_bilm().state_dict().items()}
    old |= {"elmo.mixes.0.scalar_parameters": torch.tensor([0.1, 0.2, 0.3]),
            "elmo.mixes.0.gamma": torch.tensor([2.0]),
            "elmo.mixes.0.layer_scales": torch.tensor([1.0, 0.5, 0.25])}
    model.load_saved_state(old)
    assert [s.item() for s in elmo.scalar_mix_0.scalar_parameters] == pytest.approx(
        [0.1, 0.2, 0.3])
    assert elmo.scalar_mix_0.layer_scales.tolist() == [1.0, 0.5, 0.25]
    torch.testing.assert_close(elmo.bilm.lstm.layers[0].bias,
                               old["elmo.bilm.lstm.layers.0.bias"])


# ---- ElmoEmbedder and `elmo embed` with AllenNLP's flags ---------------------------------

def test_elmo_embedder(fixture):
    options, weights, sentences, root = fixture
    embedder = ElmoEmbedder(str(options), str(weights), cuda_device=-1)
    one = embedder.embed_sentence(SENTENCES[0])
    assert one.shape == (3, 5, 32) and one.dtype == np.float32
    batch = embedder.embed_batch(SENTENCES)
    assert [a.shape for a in batch] == [(3, 5, 32), (3, 2, 32), (3, 2, 32)]
    np.testing.assert_allclose(batch[0], one, atol=1e-6)
    streamed = embedder.embed_sentences(iter(SENTENCES * 3), batch_size=2)
    assert not isinstance(streamed, list)  # a generator, as AllenNLP's
    streamed = list(streamed)
    assert len(streamed) == 9
    for got, sentence in zip(streamed, SENTENCES * 3, strict=True):
        np.testing.assert_allclose(got, embedder.embed_sentence(sentence), atol=1e-6)


def test_elmo_embedder_takes_a_model_alone_and_its_errors_speak_python(tmp_path):
    """`ElmoEmbedder("default")` is the shipped model; a model directory works too; half a
    pair is refused with the arguments' Python names, not the command's flags."""
    shipped = ElmoEmbedder("default")
    want = Embedder.from_pretrained("default").embed_sentence(SENTENCES[0])
    np.testing.assert_array_equal(shipped.embed_sentence(SENTENCES[0]), want)
    save_pretrained(random_bilm(), tmp_path / "m")
    assert ElmoEmbedder(str(tmp_path / "m")).embed_sentence(SENTENCES[1]).shape[:2] == (3, 2)
    with pytest.raises(ElmoError) as half:
        ElmoEmbedder(weight_file=tmp_path / "w.hdf5")
    assert str(half.value).startswith("ElmoEmbedder: weight_file needs its options_file")
    with pytest.raises(ElmoError) as both:
        Embedder.from_pretrained("default", options=tmp_path / "o.json")
    assert "options= and weights= in Python" in str(both.value)


def test_stateful_elmo_embedder_reproduces_allennlp(fixture):
    options, weights, sentences, root = fixture
    embedder = ElmoEmbedder(options, weights, stateful=True)
    batches = [[sentences[k][i].split() for k in range(3)] for i in range(10)]
    for i, layers in enumerate(embedder.embed_sentences(
            (s for batch in batches for s in batch), batch_size=3)):
        np.testing.assert_allclose(layers[-1], expected_top(root, i % 3, i // 3), atol=1e-5,
                                   rtol=1e-5)


@pytest.mark.parametrize("how", ["open file", "path", "text stream"])
def test_embed_file_writes_allennlp_layout(fixture, tmp_path, how):
    options, weights, _, _ = fixture
    lines = [" ".join(s) for s in SENTENCES]
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    embedder = ElmoEmbedder(options, weights)
    source = {"open file": lambda: open(path, encoding="utf-8"), "path": lambda: path,
              "text stream": lambda: io.StringIO(path.read_text())}[how]
    embedder.embed_file(source(), tmp_path / "all.hdf5")
    embedder.embed_file(source(), tmp_path / "top.hdf5", "top", 2, True)
    embedder.embed_file(source(), tmp_path / "keys.hdf5", output_format="average",
                        use_sentence_keys=True)
    with h5py.File(tmp_path / "all.hdf5", "r") as f:
        assert sorted(f) == ["0", "1", "2", "sentence_to_index"]
        assert json.loads(f["sentence_to_index"][0]) == {s: str(i) for i, s in enumerate(lines)}
        np.testing.assert_allclose(f["1"][...], embedder.embed_sentence(SENTENCES[1]), atol=1e-6)
    with h5py.File(tmp_path / "top.hdf5", "r") as f:
        assert sorted(f) == ["0", "1", "2"]
        np.testing.assert_allclose(f["0"][...], embedder.embed_sentence(SENTENCES[0])[-1],
                                   atol=1e-6)
    with h5py.File(tmp_path / "keys.hdf5", "r") as f:
        assert sorted(f) == sorted(lines)
        np.testing.assert_allclose(f[lines[2]][...],
                                   embedder.embed_sentence(SENTENCES[2]).mean(0), atol=1e-6)


def test_sentence_keys_refuse_repeated_lines(fixture, tmp_path):
    options, weights, _, _ = fixture
    path = tmp_path / "in.txt"
    path.write_text("a b\nc\na b\n", encoding="utf-8")
    with pytest.raises(Exception, match="line 3 repeats line 1"):
        ElmoEmbedder(options, weights).embed_file(path, tmp_path / "o.hdf5",
                                                  use_sentence_keys=True)
    assert not (tmp_path / "o.hdf5").exists()


def test_embed_command_takes_allennlp_flags(fixture, tmp_path):
    options, weights, _, _ = fixture
    lines = [" ".join(s) for s in SENTENCES]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", "--all", "--options-file", str(options), "--weight-file",
                 str(weights), str(src), str(out), "--quiet"]) == 0
    assert main(["embed", str(src), str(tmp_path / "top.hdf5"), "--top", "--options-file",
                 str(options), "--weight-file", str(weights), "--cuda-device", "-1",
                 "--batch-size", "2", "--forget-sentences", "--quiet"]) == 0
    assert main(["embed", str(src), str(tmp_path / "keys.hdf5"), "--average", "--options-file",
                 str(options), "--weight-file", str(weights), "--use-sentence-keys",
                 "--quiet"]) == 0
    embedder = ElmoEmbedder(options, weights)
    with h5py.File(out, "r") as f:
        assert sorted(f) == ["0", "1", "2", "sentence_to_index"]
        np.testing.assert_allclose(f["0"][...], embedder.embed_sentence(SENTENCES[0]),
                                   atol=1e-6)
    with h5py.File(tmp_path / "top.hdf5", "r") as f:
        assert sorted(f) == ["0", "1", "2"]
        assert f["1"].shape == (2, 32)
    with h5py.File(tmp_path / "keys.hdf5", "r") as f:
        assert sorted(f) == sorted(lines)
    with pytest.raises(SystemExit):  # one layer mode only, as AllenNLP's
        main(["embed", "--all", "--top", "--options-file", str(options), "--weight-file",
              str(weights), str(src), str(tmp_path / "x.hdf5")])


def test_shards_with_sentence_keys_merge_without_an_index(tmp_path):
    from elmo.embed import Embedder
    from elmo.io.hdf5_output import merge_shards

    src = tmp_path / "in.txt"
    src.write_text("a b\nc d e\nf\ng h\n", encoding="utf-8")
    embedder = Embedder(random_bilm(), batch_size=1)
    parts = [embedder.embed_file(src, tmp_path / f"part{i}.hdf5", num_shards=2, shard_index=i,
                                 use_sentence_keys=True, progress=False) for i in range(2)]
    merge_shards(parts, tmp_path / "all.hdf5")
    with h5py.File(tmp_path / "all.hdf5", "r") as f:
        assert sorted(f) == ["a b", "c d e", "f", "g h"]
        np.testing.assert_allclose(f["c d e"][...], embedder.embed_sentence(["c", "d", "e"]),
                                   atol=1e-6)
