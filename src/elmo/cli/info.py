"""`elmo info`: what a model is: format, architecture, tokenizer, where it was loaded from; for a
Hub model also its revision and files, without downloading them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from elmo.loading import hf_hub
from elmo.loading.load import load_model
from elmo.loading.resolve import FORMATS, ModelFiles, resolve_model
from elmo.modules.bilm import BiLM


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="describe a model: format, architecture, tokenizer, files",
        description="Load MODEL (any name or directory `elmo embed` takes; a released name is "
        "downloaded first) and print its format, architecture (layers, sizes, character and "
        "word vocabularies), the tokenizer it expects and where its files are. A Hub model "
        "(hf:OWNER/REPO[@REVISION]) is not downloaded: its layout, revision and files with "
        "their sizes are shown, and the rest once it is in the cache.",
    )
    p.add_argument("model", metavar="MODEL", nargs="?", default="default",
                   help="default: the shipped model")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    p.set_defaults(run=run)


def describe(model: str) -> dict[str, Any]:
    """The facts `elmo info` prints about `model`, as a JSON-ready dict. A Hub model that is
    not in the cache yet is described by its listing only (`architecture` None)."""
    files = resolve_model(model)
    info: dict[str, Any] = {"model": model, "format": files.format}
    if files.source == "hub":
        info["hub"] = hub_facts(files)
        if not info["hub"]["downloaded"]:
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


def hub_facts(files: ModelFiles) -> dict[str, Any]:
    """A Hub model's revision, commit and the files it reads with their sizes."""
    name = hf_hub.parse_hub_name(files.name)
    paths = [p for p, _ in files.remote]
    return {"repo": name.repo_id, "folder": name.subfolder, "revision": name.revision or "main",
            "commit": files.revision, "files": dict(files.remote),
            "bytes": sum(size for _, size in files.remote),
            "downloaded": hf_hub.is_cached(name, files.revision, paths)}


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
    rows = [("model", info["model"]), ("format", f"{info['format']} ({FORMATS[info['format']]})")]
    if "hub" in info:
        hub = info["hub"]
        rows += [("revision", f"{hub['revision']} (commit {hub['commit']})"),
                 *((f"  {path}", _size(size)) for path, size in hub["files"].items()),
                 ("download", f"{_size(hub['bytes'])} in {len(hub['files'])} files, "
                  + ("in the cache" if hub["downloaded"] else "not downloaded yet"))]
    if info["architecture"] is not None:
        rows += _model_rows(info)
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _model_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
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
    return [
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
