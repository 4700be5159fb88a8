"""Before training: the run directory, its vocabulary and the corpus token count.

One streamed pass over the corpus counts its tokens (for the number of steps per epoch and the
ETA) and, unless a vocabulary file is given, builds the vocabulary; memory holds the word
counts only, never the text. `run.json` records the options, so that re-running the same
command resumes the run and a different one is refused (`elmo.runs.changed_options`). Nothing
is written before training starts: a start that fails (bad input, a model that cannot be
loaded) leaves no directory.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from elmo.data.corpus import EVERY_DOCUMENT, Selection, Tally, expand_paths, iter_sentences
from elmo.data.prepared import PreparedCorpus, open_corpus
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_write_text
from elmo.loading.formats.native import RUN_NAME, VOCAB_NAME, WEIGHTS_NAME
from elmo.runs import (
    CHECKPOINT_NAME,
    MARKER_NAME,
    PRETRAINING,
    changed_options,
    mark_run_folder,
)
from elmo.tokenize import DEFAULT_TOKENIZER
from elmo.training.config import RESUMABLE_CHANGES, TrainConfig
from elmo.training.saving import check_weights_copy
from elmo.vocab import Vocabulary


@dataclass
class CorpusStats:
    n_sentences: int = 0
    n_tokens: int = 0  # predictions per direction: words + one </S> per sentence (as bilm-tf)
    left_out: int = 0  # documents left out by title


def scan_corpus(
    paths: Sequence[Path],
    tokenizer: str = DEFAULT_TOKENIZER,
    *,
    input_format: str = "auto",
    selection: Selection = EVERY_DOCUMENT,
    build_vocab: bool = True,
    min_count: int = 1,
    max_vocab: int | None = None,
    progress: bool = False,
) -> tuple[CorpusStats, Vocabulary | None]:
    """Count the corpus's sentences and tokens (of the documents `selection` keeps, and
    those it leaves out); build its vocabulary if `build_vocab`."""
    stats, tally = CorpusStats(), Tally()

    def counted() -> Iterator[list[str]]:
        bar = tqdm(iter_sentences(paths, tokenizer, input_format=input_format,
                                  selection=selection, tally=tally),
                   desc="scanning corpus", unit=" sent", disable=not progress,
                   mininterval=1.0)
        for words in bar:
            stats.n_sentences += 1
            stats.n_tokens += len(words) + 1
            yield words
        stats.left_out = tally.left_out

    if build_vocab:
        vocab = Vocabulary.build(counted(), min_count=min_count, max_size=max_vocab)
        return stats, vocab
    for _ in counted():
        pass
    return stats, None


# ---- the run directory ----------------------------------------------------------------


@dataclass
class RunInfo:
    """What a run directory's `run.json` records: the options and the corpus scanned."""

    config: TrainConfig
    train_files: list[str]
    n_sentences: int
    n_tokens: int
    world_size: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        return cls(**{**data, "config": TrainConfig.from_dict(data["config"])})

    def save(self, out_dir: Path) -> None:
        atomic_write_text(out_dir / RUN_NAME, json.dumps(self.to_dict(), indent=2) + "\n")


@dataclass
class PreparedRun:
    """What a run starts from: its options and corpus counts, its vocabulary, and whether the
    run directory is still to be written (`start_run_dir`)."""

    info: RunInfo
    vocab: Vocabulary
    fresh: bool


def prepare_run(
    config: TrainConfig, out_dir: Path, world_size: int, say: Callable[[str], None], *,
    marked: bool, progress: bool = False,
) -> PreparedRun:
    """Check that `config` continues the run in `out_dir` (`marked`: the folder is marked as
    a pretraining run, see `elmo.runs.claim_run_folder`), or, for a new run, scan the corpus
    and build the vocabulary without writing anything: the directory is written by
    `start_run_dir` once the model is built, so a failed start leaves nothing behind.
    `say` reports what happens."""
    corpus = open_corpus(config.train, config.tokenizer, config.input_format,
                         config.exclude_titles)
    files = corpus.files
    if config.weights_copy is not None:
        check_weights_copy(Path(config.weights_copy), out_dir)
    if marked and (out_dir / RUN_NAME).exists():  # else killed before it started: start anew
        info = _check_resume(config, out_dir, world_size, files, say)
        vocab = Vocabulary.from_file(out_dir / VOCAB_NAME)
        if isinstance(corpus, PreparedCorpus) and corpus.vocab != vocab:
            raise ElmoError(f"the prepared corpus {files[0]} has another vocabulary than the "
                            f"run in {out_dir}: resuming needs the corpus it started with")
        return PreparedRun(info, vocab, fresh=False)
    clashes = [name for name in (CHECKPOINT_NAME, WEIGHTS_NAME) if (out_dir / name).exists()]
    if not marked and clashes:
        raise ElmoError(f"{out_dir} holds {', '.join(clashes)} but no {MARKER_NAME}: it is not a "
                        "training run directory; choose a new --out")
    valid = expand_paths([config.valid]) if config.valid is not None else None
    if valid is not None and next(iter_sentences(valid, config.tokenizer,
                                                 input_format=config.input_format), None) is None:
        raise ElmoError(f"the validation file {config.valid} has no sentences")
    if isinstance(corpus, PreparedCorpus):
        stats, vocab = _prepared_stats(config, corpus)
    else:
        say(f"scanning {len(files)} training file(s)")
        stats, vocab = scan_corpus(
            corpus.paths, config.tokenizer, input_format=config.input_format,
            selection=corpus.selection, build_vocab=config.vocab is None,
            min_count=config.min_count, max_vocab=config.max_vocab, progress=progress,
        )
    if stats.n_sentences == 0:
        raise ElmoError(f"the training files {config.train} have no sentences")
    if vocab is None:
        vocab = Vocabulary.from_file(config.vocab)
    left_out = f" ({stats.left_out:,} documents left out by title)" \
        if config.exclude_titles else ""
    say(f"{stats.n_sentences:,} sentences, {stats.n_tokens:,} tokens{left_out}; "
        f"vocabulary of {len(vocab):,} words")
    info = RunInfo(config, files, stats.n_sentences, stats.n_tokens, world_size)
    return PreparedRun(info, vocab, fresh=True)


def _prepared_stats(config: TrainConfig, corpus: PreparedCorpus
                    ) -> tuple[CorpusStats, Vocabulary]:
    """A prepared corpus's counts and vocabulary, which the vocabulary options given must
    not contradict."""
    manifest, where = corpus.manifest, corpus.directory
    if config.vocab is not None and Vocabulary.from_file(config.vocab) != corpus.vocab:
        raise ElmoError(f"--vocab {config.vocab} is not the vocabulary of the prepared corpus "
                        f"{where}: leave --vocab out (the corpus's is used), or prepare the "
                        "corpus with it")
    built = (manifest.min_count, manifest.max_vocab)
    if (config.min_count, config.max_vocab) not in ((1, None), built):
        how = "given as a file" if built[0] is None else f"built with --min-count {built[0]}" \
            + (f" --max-vocab {built[1]}" if built[1] is not None else "")
        raise ElmoError(f"the prepared corpus {where} brings its vocabulary ({how}): leave "
                        "--min-count and --max-vocab out, or prepare the corpus with them")
    return CorpusStats(manifest.n_sentences, manifest.n_tokens), corpus.vocab


def start_run_dir(out_dir: Path, prepared: PreparedRun) -> None:
    """Create the directory of a new run: its marker, `vocab.txt`, then `run.json`, which
    marks it as started (a run killed before its first checkpoint restarts from scratch when
    resumed)."""
    created = not out_dir.exists()
    try:
        mark_run_folder(out_dir, PRETRAINING)
        prepared.vocab.save(out_dir / VOCAB_NAME)
        prepared.info.save(out_dir)
    except OSError as err:
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise ElmoError(f"cannot write the run directory {out_dir}: {err.strerror or err}; "
                        "choose another --out") from err


def _check_resume(
    config: TrainConfig, out_dir: Path, world_size: int, files: list[str],
    say: Callable[[str], None],
) -> RunInfo:
    info = RunInfo.from_dict(json.loads((out_dir / RUN_NAME).read_text(encoding="utf-8")))
    allowed, denied = changed_options(info.config.to_dict(), config.to_dict(), RESUMABLE_CHANGES)
    if denied:
        raise ElmoError(
            f"{out_dir} holds a run with other options ({', '.join(denied)} differ): run the "
            "same command to resume it, or choose a new --out"
        )
    if info.world_size != world_size:
        raise ElmoError(f"{out_dir} was trained with {info.world_size} process(es); resume it "
                        f"with the same number, not {world_size}")
    if files != info.train_files:
        raise ElmoError(f"the training files matching {config.train} changed since the run "
                        "started; resuming needs the same files")
    if allowed:
        say(f"resuming with changed options: {', '.join(allowed)}")
        info.config = config
        info.save(out_dir)
    return info
