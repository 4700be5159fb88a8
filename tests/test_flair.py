"""elmo.flair.ELMoEmbeddings in flair: a SequenceTagger trained with flair's ModelTrainer on
real CoNLL-2003 sentences is saved, loaded in a fresh process and predicts the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.embed import Embedder
from elmo.errors import ElmoError
from tests.conftest import REPO, require_shared

pytest.importorskip("flair")

import flair  # noqa: E402
from flair.data import Sentence  # noqa: E402
from flair.datasets import ColumnCorpus  # noqa: E402
from flair.models import SequenceTagger  # noqa: E402
from flair.trainers import ModelTrainer  # noqa: E402

from elmo.flair import ELMoEmbeddings  # noqa: E402

SENTENCES = ["The bank of the river was muddy .", "EU rejects German call",
             "Peter Blackburn"]


def conll_sentences(path: Path, count: int) -> str:
    """The first `count` sentences of a CoNLL-2003 file (its -DOCSTART- lines left out)."""
    blocks = [b for b in path.read_text(encoding="utf-8").split("\n\n")
              if b.strip() and not b.startswith("-DOCSTART-")]
    return "\n\n".join(blocks[:count]) + "\n"


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    conll = require_shared("data", "conll2003")
    folder = tmp_path_factory.mktemp("conll")
    for name, source, count in (("train.txt", "eng.train", 40), ("dev.txt", "eng.testa", 8),
                                ("test.txt", "eng.testb", 8)):
        (folder / name).write_text(conll_sentences(conll / source, count), encoding="utf-8")
    return folder


def test_token_vectors_are_the_embedders_layers():
    layers = Embedder.from_pretrained("default").embed_sentences([s.split() for s in SENTENCES])
    for mode in ("all", "top", "average"):
        embeddings = ELMoEmbeddings("default", embedding_mode=mode)
        sentences = [Sentence(s.split()) for s in SENTENCES]
        embeddings.embed(sentences)
        for sentence, expected in zip(sentences, layers, strict=True):
            got = np.stack([t.get_embedding().cpu().numpy() for t in sentence])
            want = {"all": np.concatenate(list(expected), axis=-1), "top": expected[-1],
                    "average": expected.mean(axis=0)}[mode]
            assert got.shape == (len(sentence), embeddings.embedding_length)
            np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_a_sentence_gets_the_same_vectors_whatever_it_is_batched_with():
    embeddings = ELMoEmbeddings("default", embedding_mode="top")
    alone = Sentence(SENTENCES[1].split())
    with_others = [Sentence(s.split()) for s in SENTENCES]
    embeddings.embed(alone)
    embeddings.embed(with_others)
    # As the Embedder's own batch test (test_embed_cli.py): another batch shape sums in another
    # order, a few float32 ulps apart (1.7e-6 on values near 1.2 with the shipped model).
    np.testing.assert_allclose(alone[2].get_embedding().numpy(),
                               with_others[1][2].get_embedding().numpy(), atol=1e-5)


def test_name_and_length_are_flairs():
    embeddings = ELMoEmbeddings("default", embedding_mode="average")
    assert embeddings.name == "elmo-default-average"
    assert embeddings.embedding_length == embeddings.bilm.config.output_dim
    assert ELMoEmbeddings("default").embedding_length == 3 * embeddings.embedding_length


@pytest.mark.parametrize("model", ["pt", "pubmed"])
def test_a_flair_model_we_do_not_have_is_named(model):
    with pytest.raises(ElmoError, match=f"'{model}'.*options_file= and weight_file="):
        ELMoEmbeddings(model)


def test_an_unknown_embedding_mode_is_refused():
    with pytest.raises(ElmoError, match="embedding_mode must be one of all, top, average"):
        ELMoEmbeddings("default", embedding_mode="middle")


def small_tagger() -> SequenceTagger:
    tags = flair.data.Dictionary(add_unk=False)
    for tag in ("O", "B-LOC", "I-LOC"):
        tags.add_item(tag)
    return SequenceTagger(hidden_size=8, embeddings=ELMoEmbeddings("default"),
                          tag_dictionary=tags, tag_type="ner")


def test_loading_without_importing_elmo_flair_names_the_module_to_import(tmp_path):
    """flair has no plugin mechanism: its KeyError is all it says, and it names the module."""
    small_tagger().save(tmp_path / "tagger.pt")
    load = "import sys; from flair.models import SequenceTagger; SequenceTagger.load(sys.argv[1])"
    run = subprocess.run([sys.executable, "-c", load, str(tmp_path / "tagger.pt")],
                         capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == "KeyError: 'elmo.flair.ELMoEmbeddings'"


def test_a_model_saved_under_the_former_name_still_loads(tmp_path):
    tagger = small_tagger()
    state = tagger._get_state_dict()
    assert state["embeddings"]["__cls__"] == "elmo.flair.ELMoEmbeddings"
    state["embeddings"]["__cls__"] = "ELMoEmbeddings"  # what models saved before hold
    torch.save(state, tmp_path / "former.pt")
    loaded = SequenceTagger.load(tmp_path / "former.pt")
    assert isinstance(loaded.embeddings, ELMoEmbeddings)
    for name, tensor in tagger.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


PREDICT = """
import json, sys
import elmo.flair
from flair.data import Sentence
from flair.models import SequenceTagger
tagger = SequenceTagger.load(sys.argv[1])
sentences = [Sentence(s.split()) for s in json.loads(sys.argv[2])]
tagger.predict(sentences)
print(json.dumps([[(t.get_label("ner").value, t.get_label("ner").score) for t in s]
                  for s in sentences]))
"""


@pytest.mark.slow
def test_a_trained_tagger_is_saved_and_predicts_the_same_in_a_new_process(corpus_dir,
                                                                          tmp_path):
    flair.device = torch.device("cpu")
    corpus = ColumnCorpus(corpus_dir, {0: "text", 3: "ner"}, train_file="train.txt",
                          dev_file="dev.txt", test_file="test.txt")
    tagger = SequenceTagger(hidden_size=16, embeddings=ELMoEmbeddings("default"),
                            tag_dictionary=corpus.make_label_dictionary("ner"), tag_type="ner")
    ModelTrainer(tagger, corpus).train(tmp_path, max_epochs=1, mini_batch_size=8,
                                       learning_rate=0.5, save_final_model=True)
    texts = [s.to_tokenized_string() for s in corpus.test] + SENTENCES
    sentences = [Sentence(t.split()) for t in texts]
    tagger.predict(sentences)
    before = [[(t.get_label("ner").value, t.get_label("ner").score) for t in s]
              for s in sentences]

    run = subprocess.run([sys.executable, "-c", PREDICT, str(tmp_path / "final-model.pt"),
                          json.dumps(texts)], capture_output=True, text=True, cwd=REPO,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    after = json.loads(run.stdout.splitlines()[-1])
    assert [[label for label, _ in s] for s in after] == [[label for label, _ in s]
                                                          for s in before]
    np.testing.assert_allclose([score for s in after for _, score in s],
                               [score for s in before for _, score in s], atol=1e-6)
