"""Model directories in other projects' formats, made tiny and random: an EfML directory (as
ELMoForManyLangs' training script writes one) and an unpacked AllenNLP archive."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from elmo import save_bilm_tf
from elmo.allennlp import Elmo
from tests.conftest import random_bilm

# ---- a tiny EfML directory, laid out as the package's training script writes one ------------

NETWORK = {
    "encoder": {"name": "elmo", "projection_dim": 8, "cell_clip": 3, "proj_clip": 3, "dim": 16,
                "n_layers": 2},
    "token_embedder": {"name": "cnn", "activation": "relu", "filters": [[1, 4], [2, 4]],
                       "n_highway": 1, "word_dim": 6, "char_dim": 4,
                       "max_characters_per_token": 10},
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
CHARS = [*"abcdefghij", "\u3000", "<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]
WORDS = ["<oov>", "<bos>", "<eos>", "<pad>", "abc", "bad", "cafe"]


def efml_states(network: dict, n_chars: int, n_words: int, seed: int = 0) -> tuple[dict, dict]:
    """Random token_embedder and encoder state dicts with the package's names and shapes."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * 0.5

    emb, enc = network["token_embedder"], network["encoder"]
    f = sum(n for _, n in emb["filters"])
    embedder = {"word_emb_layer.embedding.weight": rand(n_words, emb["word_dim"]),
                "char_emb_layer.embedding.weight": rand(n_chars, emb["char_dim"])}
    for k, (width, count) in enumerate(emb["filters"]):
        embedder[f"convolutions.{k}.weight"] = rand(count, emb["char_dim"], width)
        embedder[f"convolutions.{k}.bias"] = rand(count)
    for k in range(emb["n_highway"]):
        embedder[f"highways._layers.{k}.weight"] = rand(2 * f, f) / f ** 0.5
        embedder[f"highways._layers.{k}.bias"] = rand(2 * f)
    p, c = enc["projection_dim"], enc["dim"]
    embedder["projection.weight"] = rand(p, emb["word_dim"] + f) / f ** 0.5
    embedder["projection.bias"] = rand(p)
    encoder = {}
    for k in range(enc["n_layers"]):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{k}"
            encoder[f"{prefix}.input_linearity.weight"] = rand(4 * c, p) / p ** 0.5
            encoder[f"{prefix}.state_linearity.weight"] = rand(4 * c, p) / p ** 0.5
            encoder[f"{prefix}.state_linearity.bias"] = rand(4 * c)
            encoder[f"{prefix}.state_projection.weight"] = rand(p, c) / c ** 0.5
    return embedder, encoder


def write_efml_dir(path: Path, *, config_path: str = "net.json", network_file: bool = True,
                   seed: int = 0) -> Path:
    """A tiny EfML model directory (legacy torch.save pickles, as the 2018 releases)."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"config_path": config_path, "seed": 1}))
    if network_file:
        (path / Path(config_path).name).write_text(json.dumps(NETWORK))
    # The full-width space is written as a bare tab line, as in the released files.
    (path / "char.dic").write_text("".join(f"{'' if c == chr(0x3000) else c}\t{i}\n"
                                           for i, c in enumerate(CHARS)), encoding="utf-8")
    (path / "word.dic").write_text("".join(f"{w}\t{i}\n" for i, w in enumerate(WORDS)),
                                   encoding="utf-8")
    embedder, encoder = efml_states(NETWORK, len(CHARS), len(WORDS), seed)
    for name, state in (("token_embedder.pkl", embedder), ("encoder.pkl", encoder)):
        torch.save(state, path / name, _use_new_zipfile_serialization=False)
    return path


# ---- an unpacked AllenNLP archive of a tagger -----------------------------------------------

PREFIX = "_text_field_embedder.token_embedder_elmo._elmo."
OPTIONS_KEY = "model.text_field_embedder.token_embedders.elmo.options_file"
RELEASED_URL = ("https://allennlp.s3.amazonaws.com/models/elmo/2x4096_512_2048cnn_2xhighway/"
                "elmo_2x4096_512_2048cnn_2xhighway_options.json")


def write_allennlp_archive(path: Path, bilm=None, *, options_file: str = "options.json",
                           options: str | None = "options.json") -> Path:
    """An unpacked AllenNLP archive of a tagger over `bilm` (tiny, random by default): its
    `config.json` names `options_file`, written into the archive as `options` (None: not)."""
    bilm = bilm if bilm is not None else random_bilm(seed=3)
    path.mkdir(parents=True)
    elmo_state = Elmo(None, None, 1, module=bilm).state_dict()  # AllenNLP's keys
    state = {PREFIX + key: value for key, value in elmo_state.items()}
    state["tag_projection_layer._module.weight"] = torch.randn(5, bilm.config.output_dim)
    torch.save(state, path / "weights.th")
    config = {"model": {"type": "crf_tagger", "text_field_embedder": {"token_embedders": {
        "elmo": {"type": "elmo_token_embedder", "options_file": options_file,
                 "weight_file": "weights.hdf5", "do_layer_norm": False, "dropout": 0.5}}}}}
    (path / "config.json").write_text(json.dumps(config))
    if options is not None:
        pair = save_bilm_tf(bilm, path / "pair")
        (path / options).parent.mkdir(parents=True, exist_ok=True)
        pair[0].rename(path / options)
        for leftover in (path / "pair").iterdir():
            leftover.unlink()
        (path / "pair").rmdir()
    return path


# The official fixtures in ../shared/fixtures/bilm-tf (its README says what each holds).
FIXTURES = {
    # folder, sentences file, token-embedding file (relative to fixtures/bilm-tf), vocab
    "allennlp": (
        "allennlp_test_fixtures_elmo",
        "sentences.json",
        "allennlp_test_fixtures_elmo/elmo_token_embeddings.hdf5",
        "allennlp_test_fixtures_elmo/vocab_test.txt",
    ),
    "bilm-tf": (
        "bilm-tf_tests_fixtures/model",
        "lm_embeddings_sentences.json",
        "allennlp_c3c3549_tests_fixtures_elmo/elmo_token_embeddings.hdf5",
        "bilm-tf_tests_fixtures/model/vocab_test.txt",
    ),
}
