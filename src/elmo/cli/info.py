"""`elmo info`: what a model is: format, architecture, tokenizer, where it was loaded from."""

from __future__ import annotations

import argparse
import json
from typing import Any

from elmo.loading.load import load_model
from elmo.modules.bilm import BiLM

FORMAT_NAMES = {"native": "ours (config.json + model.safetensors)",
                "bilm-tf": "bilm-tf / AllenNLP (options.json + weights.hdf5)",
                "efml": "ELMoForManyLangs (config.json, char.dic, word.dic, *.pkl)"}


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="describe a model: format, architecture, tokenizer, files",
        description="Load MODEL (any name or directory `elmo embed` takes; a released name is "
        "downloaded first) and print its format, architecture (layers, sizes, character and "
        "word vocabularies), the tokenizer it expects and where its files are.",
    )
    p.add_argument("model", metavar="MODEL", nargs="?", default="default",
                   help="default: the shipped model")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    p.set_defaults(run=run)


def describe(model: str) -> dict[str, Any]:
    """The facts `elmo info` prints about `model`, as a JSON-ready dict."""
    loaded = load_model(model, progress=False)
    extra = loaded.extra
    return {
        "model": model,
        "format": loaded.format,
        "loaded_from": [str(p) for p in loaded.files.paths],
        "architecture": architecture(loaded.bilm),
        "softmax_rows": int(extra["softmax.weight"].shape[0]) if "softmax.weight" in extra
        else None,
        "tokenizer": loaded.tokenizer,
    }


def architecture(bilm: BiLM) -> dict[str, Any]:
    """Sizes of a biLM, its token encoder's included."""
    c = bilm.config
    encoder: dict[str, Any] = {"kind": c.token_encoder,
                               "max_characters_per_token": c.max_characters_per_token}
    if c.token_encoder == "vocab":
        encoder.update(characters=len(c.char_vocab), words=len(c.word_vocab),
                       word_embed_dim=c.word_embed_dim)
    else:
        encoder["characters"] = "262 byte ids (UTF-8 bytes + 5 specials + padding)"
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


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    info = describe(args.model)
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
        return 0
    arch, enc = info["architecture"], info["architecture"]["token_encoder"]
    if enc["kind"] == "vocab":
        chars = (f"its own vocabulary of {enc['characters']:,} characters, plus "
                 + (f"{enc['words']:,} words ({enc['word_embed_dim']} dims)"
                    if enc["words"] else "no word embedding"))
    else:
        chars = "UTF-8 bytes (262 ids)"
    tokenizer = info["tokenizer"] or "none recorded (whitespace unless --tokenizer is given)"
    if info["format"] == "efml" and info["tokenizer"] is None:
        tokenizer += "; ELMoForManyLangs models expect words segmented as in UD (see docs/efml.md)"
    rows = [
        ("model", info["model"]),
        ("format", FORMAT_NAMES[info["format"]]),
        ("loaded from", ", ".join(info["loaded_from"])),
        ("token encoder", f"{chars}; words cut to {enc['max_characters_per_token'] - 2} "
         + ("characters" if enc["kind"] == "vocab" else "bytes")),
        ("char CNN", f"{arch['char_embed_dim']}-dim characters, {arch['filters']} filters "
         f"(widths {min(arch['filter_widths'])}-{max(arch['filter_widths'])}), "
         f"{arch['highway_layers']} highway"),
        ("biLSTM", f"{arch['lstm_layers']} layers x 2 directions, cell {arch['lstm_dim']}, "
         f"projection {arch['projection_dim']}"),
        ("output", f"{arch['output_layers']} layers of {arch['output_dim']} values per token"),
        ("parameters", f"{arch['parameters']:,}"),
        ("softmax", f"{info['softmax_rows']:,} words" if info["softmax_rows"] else "none"),
        ("tokenizer", tokenizer),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0
