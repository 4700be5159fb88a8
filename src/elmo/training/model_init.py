"""The model a run starts from: a fresh preset, or a trained biLM to continue training.

Continuing (paper section 2.4, domain adaptation) keeps the source's architecture and weights.
The softmax over the run's vocabulary takes the source's softmax row for every word the source
vocabulary knows (our training output has `softmax.*` tensors and `vocab.txt`); every other
word, and all words when the source has no softmax (official bilm-tf files, released models,
ELMoForManyLangs models), starts from the direction of its token-encoder vector, scaled to
the mean norm of the copied rows and given their mean bias (no copied rows: norm 1, bilm-tf's
initial scale, and bias 0). Unscaled token vectors are an order of magnitude longer than
softmax rows and start the run with absurd logits (PTB perplexity ~1e27 at step 0 for a
WikiText-2 model).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from elmo.config import BiLMConfig
from elmo.errors import ElmoError
from elmo.loading.formats.native import VOCAB_NAME
from elmo.loading.formats.registry import FORMATS
from elmo.loading.load import load_model
from elmo.loading.resolve import ModelFiles, resolve_model
from elmo.modules.bilm import BiLM
from elmo.modules.language_model import BiLanguageModel
from elmo.training.config import DEFAULT_PRESET, TrainConfig
from elmo.vocab import Vocabulary

_ENCODE_CHUNK = 4096  # words per token-encoder call when initialising the softmax


@dataclass
class InitSource:
    """A trained biLM, with its softmax and vocabulary when it has them."""

    bilm: BiLM
    softmax: tuple[torch.Tensor, torch.Tensor] | None = None  # weight (V, P), bias (V,)
    vocab: Vocabulary | None = None


def load_init_source(model: str | Path | ModelFiles) -> InitSource:
    """Any MODEL `load_model` takes, with its softmax and vocabulary when it has them (our
    format, as `elmo train` writes it, or a shipped name)."""
    loaded = load_model(model)
    vocab = Vocabulary.from_file(loaded.files.vocab_file) if loaded.files.vocab_file else None
    softmax = None
    if "softmax.weight" in loaded.extra and "softmax.bias" in loaded.extra:
        softmax = (loaded.extra["softmax.weight"], loaded.extra["softmax.bias"])
        if vocab is not None and len(vocab) != len(softmax[1]):
            raise ValueError(f"{loaded.files.vocab_file} has {len(vocab)} words but the softmax "
                             f"has {len(softmax[1])} rows")
    return InitSource(loaded.bilm, softmax, vocab)


@torch.no_grad()
def init_softmax_from(lm: BiLanguageModel, vocab: Vocabulary, source: InitSource) -> int:
    """Set lm's softmax from `source` as described above; returns the rows copied."""
    head, encoder = lm.softmax, lm.bilm.token_encoder
    words = vocab.words
    for start in range(0, len(words), _ENCODE_CHUNK):
        chunk = words[start : start + _ENCODE_CHUNK]
        ids = lm.bilm.batch_to_ids([chunk])[0]
        head.weight[start : start + len(chunk)] = encoder(ids.to(head.weight.device))
    head.weight.div_(head.weight.norm(dim=1, keepdim=True).clamp_min(1e-12))  # unit rows
    head.bias.zero_()
    pairs = []
    if source.softmax is not None and source.vocab is not None:
        pairs = [(i, source.vocab.word_to_id(w)) for i, w in enumerate(words)
                 if w in source.vocab]
    if pairs:
        ours, theirs = (torch.tensor(ids) for ids in zip(*pairs, strict=True))
        weight, bias = (t[theirs].to(head.weight) for t in source.softmax)
        head.weight.mul_(weight.norm(dim=1).mean())
        head.bias.fill_(bias.mean())
        head.weight[ours], head.bias[ours] = weight, bias
    return len(pairs)


def build_language_model(config: TrainConfig, vocab: Vocabulary) -> BiLanguageModel:
    """A new preset model (random weights from the current torch seed) or a continued one."""
    source = load_init_source(config.init_from) if config.init_from else None
    if source is not None:
        bilm_config = dataclasses.replace(
            source.bilm.config, vocab_size=len(vocab), dropout=config.dropout
        )
    else:
        unclipped = {} if config.lstm_clip else {"cell_clip": None, "proj_clip": None}
        bilm_config = BiLMConfig.preset(
            config.preset or DEFAULT_PRESET, vocab_size=len(vocab), dropout=config.dropout,
            **unclipped,
        )
    lm = BiLanguageModel(BiLM(bilm_config), len(vocab), config.softmax, config.num_samples)
    if source is not None:
        lm.bilm.load_state_dict(source.bilm.state_dict())
        init_softmax_from(lm, vocab, source)
    return lm


def load_language_model(
    model: str | Path | ModelFiles,
) -> tuple[BiLanguageModel, Vocabulary]:
    """A model written by `elmo train` or a shipped name, with its softmax and vocabulary."""
    files = resolve_model(model)
    source = load_init_source(files) if FORMATS[files.format].vocab_name else None
    if source is None or source.softmax is None or source.vocab is None:
        raise ElmoError(
            f"{model} is not a model with a softmax and vocabulary: perplexity needs a "
            "model directory written by `elmo train` (model.safetensors with softmax.* "
            f"tensors, {VOCAB_NAME}) or a shipped model name; released, bilm-tf and "
            "ELMoForManyLangs models ship without their softmax"
        )
    lm = BiLanguageModel(source.bilm, len(source.vocab), softmax="full")
    with torch.no_grad():
        lm.softmax.weight.copy_(source.softmax[0])
        lm.softmax.bias.copy_(source.softmax[1])
    return lm.eval(), source.vocab
