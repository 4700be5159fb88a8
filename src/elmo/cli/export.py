"""`elmo export`: write a biLM to a target: a Hugging Face Hub repo, an ONNX graph, or a
directory in a format that can be written (the official bilm-tf pair, ours).

Each target is an `ExportTarget`: those in `TARGETS`, then one directory per format whose
record has `save` (`DirectoryTarget`), tried in that order. A new target is one record."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from abc import ABC, abstractmethod
from pathlib import Path

from elmo.cli import export_onnx
from elmo.cli.common import add_overwrite, model_help
from elmo.errors import ElmoError
from elmo.io.atomic import claim_output
from elmo.loading.formats.registry import ModelFormat, export_formats
from elmo.loading.hf_hub import PREFIX as HUB_PREFIX
from elmo.loading.hf_hub import parse_hub_name
from elmo.loading.load import load_model
from elmo.loading.publish import HUB_FORMAT, export_names, push_to_hub, save_model
from elmo.loading.resolve import resolve_model

DEFAULT_RULE = "the default for an OUTDIR not ending in .onnx"


class ExportTarget(ABC):
    """Where `elmo export` writes: `format`, its --format value (and what "wrote" names);
    `takes(args)`, whether it writes OUTDIR (`args.out_dir`) given --format (`args.format`,
    None when not given), tried in `export_targets()`' order; `write(args)`, writing MODEL
    there, returns the line printed; `help()`, its sentence in the command's description;
    `rule`, why it was written when --format was not given; `add_arguments(p)` adds the
    options of its own, `options` (their dests), refused for any other target, which that
    message names by `where`."""

    format = ""
    rule = ""
    where = ""
    options: tuple[str, ...] = ()

    @abstractmethod
    def help(self) -> str: ...

    def add_arguments(self, p: argparse.ArgumentParser) -> None:  # noqa: B027 (none by default)
        pass

    @abstractmethod
    def takes(self, args: argparse.Namespace) -> bool: ...

    @abstractmethod
    def write(self, args: argparse.Namespace) -> str: ...

    def wrote(self, args: argparse.Namespace, paths: list[Path]) -> str:
        """The line printed after writing `paths`: why this target when --format was not
        given, and the --format values of the others."""
        why = ""
        if args.format is None:
            others = " or ".join(f for f in format_choices() if f != self.format)
            why = f" ({self.rule}; --format {others} for another)"
        return f"wrote {self.format}{why}: " + ", ".join(str(p) for p in paths)


class HubTarget(ExportTarget):
    """OUTDIR hf:OWNER/REPO: published in our format, with a model card."""

    format = HUB_FORMAT
    rule = "OUTDIR is a Hub repo, hf:OWNER/REPO"
    where = "OUTDIR hf:OWNER/REPO"
    options = ("revision", "private", "language", "license")

    def help(self) -> str:
        return ("OUTDIR hf:OWNER/REPO[/SUB/DIR] publishes to that Hugging Face Hub repo "
                f"(created if missing) in our format ({self.format}), with a model card "
                "README.md; `hf:OWNER/REPO` then loads it (docs/hub.md).")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        hub = p.add_argument_group(f"publishing to the Hub ({self.where})")
        hub.add_argument("--revision", metavar="BRANCH",
                         help="commit to this branch, created from the default branch if "
                         "missing (default: the default branch)")
        hub.add_argument("--private", action="store_true",
                         help="create the repo private (a repo that exists keeps its "
                         "visibility)")
        hub.add_argument("--language", action="append", metavar="CODE",
                         help="the model card's language (ISO 639 code; repeat for several); "
                         "default: what MODEL records, if anything")
        hub.add_argument("--license", help="the model card's license (a Hub license id, e.g. "
                         "apache-2.0); default: what MODEL records, if anything")

    def takes(self, args: argparse.Namespace) -> bool:
        return args.out_dir.startswith(HUB_PREFIX)

    def write(self, args: argparse.Namespace) -> str:
        if args.format not in (None, self.format):
            raise ElmoError(f"a Hub repo gets our format ({self.format}), not {args.format}: "
                            "leave out --format")
        target = parse_hub_name(args.out_dir)
        if target.revision is not None and args.revision not in (None, target.revision):
            raise ElmoError(f"{args.out_dir} and --revision {args.revision} name two branches")
        repo = str(dataclasses.replace(target, revision=None)).removeprefix(HUB_PREFIX)
        url = push_to_hub(args.model, repo, revision=args.revision or target.revision,
                          private=args.private or None,
                          language=args.language, license=args.license)
        return f"published {args.model} to {args.out_dir}: {url}"


class OnnxTarget(ExportTarget):
    """An ONNX graph of the inference biLM (`elmo.cli.export_onnx`)."""

    format = "onnx"
    rule = "OUTDIR ends in .onnx"
    where = "--format onnx"
    options = ("layers",)

    def help(self) -> str:
        return ("An OUTDIR ending in .onnx (or --format onnx) writes an ONNX graph of the "
                "inference biLM (docs/deployment.md).")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        export_onnx.add_arguments(p)

    def takes(self, args: argparse.Namespace) -> bool:
        return args.format == self.format or (
            args.format is None and args.out_dir.endswith(export_onnx.SUFFIX))

    def write(self, args: argparse.Namespace) -> str:
        return self.wrote(args, [export_onnx.write(args)])


class DirectoryTarget(ExportTarget):
    """A directory in the format `fmt` (whose record has `save`), with the vocabulary and the
    record that came with the model (`elmo.loading.publish.save_model`)."""

    def __init__(self, fmt: ModelFormat) -> None:
        self.fmt = fmt
        self.format = fmt.name
        self.rule = DEFAULT_RULE if fmt.export_default else ""

    def help(self) -> str:
        note = f" ({self.fmt.save_note})" if self.fmt.save_note else ""
        return f"--format {self.format} writes {' + '.join(self.fmt.saved_files)}{note}."

    def takes(self, args: argparse.Namespace) -> bool:
        return args.format == self.format or (args.format is None and self.fmt.export_default)

    def write(self, args: argparse.Namespace) -> str:
        files = resolve_model(args.model).local()
        model_path = [args.model] if Path(args.model).exists() else []
        with claim_output(args.out_dir, inputs=model_path, overwrite=args.overwrite,
                          directory_of=export_names(files, self.format)) as out_dir:
            written = save_model(load_model(files), out_dir, self.format,
                                 exported_from=str(args.model))
        return self.wrote(args, written)


# Tried in this order, before the directories of `export_formats()`.
TARGETS: list[ExportTarget] = [HubTarget(), OnnxTarget()]


def export_targets() -> list[ExportTarget]:
    """Every target, in the order they are tried: `TARGETS`, then a directory per format that
    can be written."""
    return [*TARGETS, *(DirectoryTarget(f) for f in export_formats().values())]


def format_choices() -> list[str]:
    """The values of --format."""
    return sorted({t.format for t in export_targets()})


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    targets = export_targets()
    p = sub.add_parser(
        name,
        help="export a biLM to the official bilm-tf format or to ours, or publish it on the Hub",
        description="Write MODEL (" + model_help() + ") to OUTDIR (a directory, created if "
        "missing). " + " ".join(t.help() for t in targets) + " A directory also gets "
        "vocab.txt when MODEL has one, and card.json with what MODEL records (tokenizer, data, "
        "perplexity); the softmax is not exported (the official prediction files have none).",
    )
    p.add_argument("model", metavar="MODEL")
    p.add_argument("out_dir", metavar="OUTDIR", help="a directory, or hf:OWNER/REPO")
    p.add_argument("--format", choices=format_choices(), default=None,
                   help="default: " + ", ".join(f"{t.format} ({t.rule})"
                                                for t in targets if t.rule))
    add_overwrite(p)
    for target in targets:
        target.add_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    targets = export_targets()
    target = next(t for t in targets if t.takes(args))
    for other in targets:
        given = [f"--{o.replace('_', '-')}" for o in other.options
                 if getattr(args, o) != parser.get_default(o)]
        if other is not target and given:
            parser.error(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to "
                         f"{other.where} only")
    print(target.write(args), file=sys.stderr)
    return 0
