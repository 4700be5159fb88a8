"""`elmo bio-embeddings CONFIG` (and the `bio_embeddings` command): run a bio_embeddings
pipeline config, writing its output folder (`elmo.bio.pipeline`)."""

from __future__ import annotations

import argparse
import logging
import sys

from elmo.bio.pipeline import run_pipeline

COMMAND = "bio-embeddings"  # its name in elmo.cli.SUBCOMMANDS


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="run a bio_embeddings pipeline config (YAML) into its output folder",
        description="Run a bio_embeddings pipeline config as bio_embeddings did: the global "
        "section (sequences_file, prefix, simple_remapping) and stages of type embed "
        "(protocol seqvec), project (tsne, umap) and visualize (plotly), writing the same "
        "files under the prefix. The config, the FASTA file and what each stage can check "
        "are checked before anything is written. A rerun keeps the finished stages whose "
        "options, inputs and proteins are unchanged and resumes an unfinished one; a prefix "
        "this pipeline did not write is refused without --overwrite. Relative paths are "
        "relative to the working directory.",
    )
    p.add_argument("config", metavar="CONFIG", help="the pipeline config (YAML)")
    p.add_argument("-o", "--overwrite", action="store_true",
                   help="compute the config anew in an existing prefix (its stage directories "
                   "are replaced; only those a stage wrote, or empty ones)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or log lines")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if not args.quiet:
        _log_to_stderr("elmo.bio", "elmo.memory")
    run_pipeline(args.config, overwrite=args.overwrite, progress=not args.quiet)
    return 0


def _log_to_stderr(*names: str) -> None:
    """Show the INFO lines of these loggers on stderr (once, however often `run` is called)."""
    for name in names:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not any(getattr(h, "elmo_cli", False) for h in logger.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("elmo: %(message)s"))
            handler.elmo_cli = True
            logger.addHandler(handler)

