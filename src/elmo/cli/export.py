"""`elmo export`: write a biLM in the official bilm-tf format (options.json + weights.hdf5) or
in our format (config.json + model.safetensors)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from elmo.cli.common import add_overwrite
from elmo.io.atomic import atomic_output, atomic_write_text, claim_output
from elmo.loading.formats.bilm_tf import save_bilm_tf
from elmo.loading.formats.native import CONFIG_NAME, VOCAB_NAME, WEIGHTS_NAME, save_pretrained
from elmo.loading.load import load_model
from elmo.loading.resolve import CARD_NAME, resolve_model

# The files each format writes into OUTDIR (vocab.txt too, when MODEL has one).
FORMATS = {"bilm-tf": ("options.json", "weights.hdf5"), "native": (CONFIG_NAME, WEIGHTS_NAME)}


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="export a biLM to the official bilm-tf format or to ours",
        description="Write MODEL (a directory from `elmo train` or in our format, a released "
        "name, an ELMoForManyLangs directory, or a directory with an options/weights pair) to "
        "OUTDIR (created if missing): "
        "bilm-tf writes options.json + weights.hdf5, native writes config.json + "
        "model.safetensors (what `elmo embed OUTDIR` loads fastest); plus vocab.txt when MODEL "
        "has one, and card.json with the tokenizer MODEL records. The softmax is not exported "
        "(the official prediction files have none). bilm-tf holds byte-level models only: "
        "ELMoForManyLangs models export to native.",
    )
    p.add_argument("model", metavar="MODEL")
    p.add_argument("out_dir", metavar="OUTDIR")
    p.add_argument("--format", choices=sorted(FORMATS), default="bilm-tf",
                   help="default bilm-tf")
    add_overwrite(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    files = resolve_model(args.model).local()
    vocab, tokenizer = files.vocab_file, files.recorded_tokenizer()
    names = FORMATS[args.format] + ((VOCAB_NAME,) if vocab is not None else ()) \
        + ((CARD_NAME,) if tokenizer is not None else ())
    model_path = [args.model] if Path(args.model).exists() else []
    with claim_output(args.out_dir, inputs=model_path, overwrite=args.overwrite,
                      directory_of=names) as out_dir:
        bilm = load_model(files).bilm
        if args.format == "native":
            save_pretrained(bilm, out_dir)
        else:
            save_bilm_tf(bilm, out_dir)
        if vocab is not None:
            with atomic_output(out_dir / VOCAB_NAME) as tmp:
                shutil.copyfile(vocab, tmp)
        if tokenizer is not None:  # `elmo embed OUTDIR` splits lines as MODEL does
            atomic_write_text(out_dir / CARD_NAME, json.dumps(
                {"tokenizer": tokenizer, "exported_from": str(args.model)}, indent=2) + "\n")
    written = [out_dir / name for name in names]
    print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0
