"""`elmo info`: what a model is: format, architecture, tokenizer, where it was loaded from; for a
Hub model also its revision and files, without downloading them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from elmo.loading.describe import describe_model
from elmo.loading.formats.registry import FORMATS
from elmo.token_encoders import token_encoder


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


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    info = describe_model(args.model)
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
        return 0
    fmt = FORMATS[info["format"]]
    rows = [("model", info["model"]), ("format", f"{fmt.name} ({fmt.description})")]
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
    encoder = token_encoder(enc["kind"])
    tokenizer = info["tokenizer"] or "none recorded (whitespace unless --tokenizer is given)"
    note = FORMATS[info["format"]].tokenizer_note
    if note and info["tokenizer"] is None:
        tokenizer += f"; {note}"
    return [
        ("loaded from", ", ".join(info["loaded_from"])),
        ("token encoder", f"{encoder.summary(enc)}; words cut to "
         f"{enc['max_characters_per_token'] - 2} {encoder.unit}"),
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
