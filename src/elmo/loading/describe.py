"""What a model is, as facts `elmo info` prints: its format, architecture, tokenizer and where
its files are; for a Hub model also its revision and files, without downloading them."""

from __future__ import annotations

from typing import Any

from elmo.loading.load import load_model
from elmo.loading.resolve import resolve_model
from elmo.modules.bilm import BiLM


def describe_model(model: str) -> dict[str, Any]:
    """What `model` is (its format, architecture, tokenizer and files, and what its source
    says of it), as a JSON-ready dict (what `elmo info` prints). A model its source describes
    without downloading it (a Hub model not in the cache yet: its listing) is described by
    that alone (`architecture` None)."""
    files = resolve_model(model)
    info: dict[str, Any] = {"model": model, "format": files.format,
                            **files.source.facts(files)}
    if files.source.describe_unloaded(files):
        return {**info, "loaded_from": [], "architecture": None, "softmax_rows": None,
                "tokenizer": None}
    loaded = load_model(files, progress=False)
    extra = loaded.extra
    return {
        **info,
        "loaded_from": [str(p) for p in loaded.files.paths],
        "architecture": architecture(loaded.bilm),
        "softmax_rows": int(extra["softmax.weight"].shape[0]) if "softmax.weight" in extra
        else None,
        "tokenizer": loaded.tokenizer,
    }


def architecture(bilm: BiLM) -> dict[str, Any]:
    """Sizes of a biLM, its token encoder's included."""
    c = bilm.config
    encoder = {"kind": c.token_encoder, "max_characters_per_token": c.max_characters_per_token,
               **c.encoder.facts(c)}
    return {
        "token_encoder": encoder,
        "char_embed_dim": c.char_embed_dim,
        "filters": sum(n for _, n in c.filters),
        "filter_widths": [w for w, _ in c.filters],
        "highway_layers": c.n_highway,
        "lstm_layers": c.n_layers,
        "lstm_dim": c.lstm_dim,
        "projection_dim": c.projection_dim,
        "output_layers": bilm.num_layers,
        "output_dim": c.output_dim,
        "parameters": sum(p.numel() for p in bilm.parameters()),
    }
