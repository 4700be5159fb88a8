"""`elmo export`: write a biLM in the official bilm-tf format (options.json + weights.hdf5) or
in ours (config.json + model.safetensors), or publish it to a Hugging Face Hub repo."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from elmo.cli import export_onnx
from elmo.cli.common import MODEL_HELP, add_overwrite
from elmo.errors import ElmoError
from elmo.io.atomic import claim_output
from elmo.loading.formats.registry import BILM_TF, NATIVE
from elmo.loading.hf_hub import PREFIX as HUB_PREFIX
from elmo.loading.hf_hub import parse_hub_name
from elmo.loading.load import load_model
from elmo.loading.publish import EXPORT_FORMATS, export_names, push_to_hub, save_model
from elmo.loading.resolve import resolve_model

FORMAT_CHOICES = sorted([*EXPORT_FORMATS, "onnx"])


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="export a biLM to the official bilm-tf format or to ours, or publish it on the Hub",
        description="Write MODEL (" + MODEL_HELP + ") to OUTDIR (created if missing): "
        "bilm-tf writes options.json + weights.hdf5, native writes config.json + "
        "model.safetensors (what `elmo embed OUTDIR` loads fastest); plus vocab.txt when MODEL "
        "has one, and card.json with what MODEL records (tokenizer, data, perplexity). The "
        "softmax is not exported (the official prediction files have none). bilm-tf holds "
        "byte-level models only: ELMoForManyLangs models export to native. "
        "OUTDIR hf:OWNER/REPO[/SUB/DIR] publishes to that Hugging Face Hub repo (created if "
        "missing) in our format, with a model card README.md; `hf:OWNER/REPO` then loads it "
        "(docs/hub.md). An OUTDIR ending in .onnx (or --format onnx) writes an ONNX graph of "
        "the inference biLM (docs/deployment.md).",
    )
    p.add_argument("model", metavar="MODEL")
    p.add_argument("out_dir", metavar="OUTDIR", help="a directory, or hf:OWNER/REPO")
    p.add_argument("--format", choices=FORMAT_CHOICES, default=None,
                   help="default: onnx for an OUTDIR ending in .onnx, bilm-tf for any other "
                   "directory; a Hub repo gets native")
    add_overwrite(p)
    export_onnx.add_arguments(p)
    hub = p.add_argument_group("publishing to the Hub (OUTDIR hf:OWNER/REPO)")
    hub.add_argument("--revision", metavar="BRANCH",
                     help="commit to this branch, created from the default branch if missing "
                     "(default: the default branch)")
    hub.add_argument("--private", action="store_true",
                     help="create the repo private (a repo that exists keeps its visibility)")
    hub.add_argument("--language", action="append", metavar="CODE",
                     help="the model card's language (ISO 639 code; repeat for several); "
                     "default: what MODEL records, if anything")
    hub.add_argument("--license", help="the model card's license (a Hub license id, e.g. "
                     "apache-2.0); default: what MODEL records, if anything")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.out_dir.startswith(HUB_PREFIX):
        return _publish(args)
    hub_options = [f"--{o}" for o in ("revision", "private", "language", "license")
                   if getattr(args, o)]
    if hub_options:
        parser.error(f"{', '.join(hub_options)} apply to OUTDIR hf:OWNER/REPO only")
    if export_onnx.wants_onnx(args):
        fmt, written = "onnx", [export_onnx.write(args)]
    else:
        if args.layers != "all":
            parser.error("--layers applies to --format onnx only")
        fmt = args.format or BILM_TF.name
        files = resolve_model(args.model).local()
        model_path = [args.model] if Path(args.model).exists() else []
        with claim_output(args.out_dir, inputs=model_path, overwrite=args.overwrite,
                          directory_of=export_names(files, fmt)) as out_dir:
            written = save_model(load_model(files), out_dir, fmt, exported_from=str(args.model))
    print(f"wrote {fmt}{_default_chosen(args, fmt)}: " + ", ".join(str(p) for p in written),
          file=sys.stderr)
    return 0


def _default_chosen(args: argparse.Namespace, fmt: str) -> str:
    """Why `fmt` was written when --format was left out (OUTDIR's suffix): '' otherwise."""
    if args.format is not None:
        return ""
    rule = "OUTDIR ends in .onnx" if fmt == "onnx" else "the default for an OUTDIR not " \
        "ending in .onnx"
    others = " or ".join(f for f in FORMAT_CHOICES if f != fmt)
    return f" ({rule}; --format {others} for another)"


def _publish(args: argparse.Namespace) -> int:
    if args.format not in (None, NATIVE.name):
        raise ElmoError(f"a Hub repo gets our format ({NATIVE.name}), not {args.format}: leave "
                        "out --format")
    target = parse_hub_name(args.out_dir)
    if target.revision is not None and args.revision not in (None, target.revision):
        raise ElmoError(f"{args.out_dir} and --revision {args.revision} name two branches")
    repo = str(dataclasses.replace(target, revision=None)).removeprefix(HUB_PREFIX)
    url = push_to_hub(args.model, repo, revision=args.revision or target.revision,
                      private=args.private or None,
                      language=args.language, license=args.license)
    print(f"published {args.model} to {args.out_dir}: {url}", file=sys.stderr)
    return 0
