"""A prepared corpus (elmo.data.prepared, `elmo prepare-corpus`): token ids in shards that a
run reads instead of the text, with the same batches, the same training, and exact resumption
across shard boundaries (after a SIGKILL too); damaged, missing or mismatched parts are named."""

from __future__ import annotations

import json
import lzma
import os
import re
import signal
import subprocess
import sys
import zipfile
from dataclasses import replace

import pytest

from elmo.cli import main
from elmo.data.batching import BPTTConfig
from elmo.data.prepared import MANIFEST_NAME, PreparedCorpus, prepare_corpus
from elmo.errors import ElmoError, InputFileError
from elmo.runs import CHECKPOINT_NAME, read_checkpoint_meta
from elmo.training.stream import TrainStream
from elmo.vocab import Vocabulary
from tests.conftest import REPO
from tests.helpers.training import (
    assert_identical,
    elmo_killed,
    run,
    run_files,
    tiny_config,
    train_args,
    write_corpus,
    write_documents,
)


@pytest.fixture
def corpus(tmp_path):
    """A text corpus, the same sentences as WikiExtractor output, and a prepared corpus of
    them in shards of about 60 tokens (~18 shards), with a vocabulary of the 17 most frequent
    words (so that words outside it are stored too)."""
    paths = write_documents(tmp_path, n_train=160)
    prepared = tmp_path / "prepared"
    prepare_corpus([paths["wikiextractor"]], prepared, max_vocab=20, shard_tokens=60)
    return {**paths, "prepared": prepared}


def assert_same_batches(got, want):
    assert got.words_fwd == want.words_fwd and got.words_bwd == want.words_bwd
    for name in ("token_ids_fwd", "next_ids", "token_ids_bwd", "prev_ids", "mask"):
        assert (getattr(got, name) == getattr(want, name)).all(), name


@pytest.mark.parametrize("world_size", [1, 3])
def test_a_prepared_corpus_gives_the_batches_of_its_text_and_resumes_anywhere(corpus,
                                                                              world_size):
    """Over several epochs, every rank, with the window shuffle: the same batches as the text
    (words outside the vocabulary included), and a stream resumed after any batch (so inside
    and across shard boundaries) goes on with them."""
    text_vocab = Vocabulary.build((line.split() for line in
                                   corpus["text"].read_text().splitlines()), max_size=20)
    prepared = PreparedCorpus(corpus["prepared"])
    assert prepared.vocab == text_vocab and len(prepared.manifest.shards) > 15
    assert sum(s.unknown for s in prepared.manifest.shards) > 0
    config = BPTTConfig(batch_size=3, unroll_steps=7, shuffle_window=5, seed=2)
    for rank in range(world_size):
        def stream(source, rank=rank) -> TrainStream:
            return TrainStream([source], "whitespace", text_vocab, config, rank, world_size)

        text = stream(corpus["text"])
        want = [next(text) for _ in range(90 // world_size)]
        assert text.epoch >= 1
        ids = stream(corpus["prepared"])
        for w in want:
            assert_same_batches(next(ids), w)
        for cut in range(1, len(want), 4):
            first = stream(corpus["prepared"])
            for _ in range(cut):
                next(first)
            resumed = stream(corpus["prepared"])
            resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
            for w in want[cut:cut + 6]:
                assert_same_batches(next(resumed), w)


def test_training_on_a_prepared_corpus_equals_training_on_its_text(corpus, tmp_path):
    """Bit for bit, stopped at step 10 and resumed to 20 (the vocabulary built alike)."""
    run(tiny_config(corpus["text"], max_steps=20, max_vocab=20), tmp_path / "text")
    out = tmp_path / "from-ids"
    run(tiny_config(corpus["prepared"], max_steps=10), out)
    assert run(tiny_config(corpus["prepared"], max_steps=20), out).step == 20
    assert (out / "vocab.txt").read_text() == (tmp_path / "text" / "vocab.txt").read_text()
    assert_identical(run_files(out), run_files(tmp_path / "text"))
    info = json.loads((out / "run.json").read_text())
    assert info["train_files"] == [str(corpus["prepared"])]
    assert (info["n_sentences"], info["n_tokens"]) == (160, sum(
        len(line.split()) + 1 for line in corpus["text"].read_text().splitlines()))


def test_a_run_on_a_prepared_corpus_killed_then_rerun_ends_bit_identical(corpus, tmp_path):
    """Killed with SIGKILL after a checkpoint past several shards, the same command resumes
    and ends as a run never interrupted."""
    # room after the kill's moment (step 12), so that a loaded host still kills it mid-run
    extra = ["--max-steps", "120", "--checkpoint-every", "6", "--log-every", "5", "--softmax",
             "sampled", "--num-samples", "12", "--threads", "1", "--prefetch", "2"]
    killed = tmp_path / "killed"
    args = train_args(corpus["prepared"], None, killed, *extra)

    def checkpoint_step() -> int:
        path = killed / CHECKPOINT_NAME
        return read_checkpoint_meta(path)["step"] if path.exists() else 0

    elmo_killed(args, 1, kill_when=lambda: checkpoint_step() >= 12)
    assert 12 <= checkpoint_step() < 120
    assert main(args) == 0
    assert main(train_args(corpus["prepared"], None, tmp_path / "reference", *extra)) == 0
    assert_identical(run_files(killed), run_files(tmp_path / "reference"))


def test_a_run_needs_only_the_shards_it_reaches(corpus):
    """The last shards missing, the batches before them come; the first one read past them
    names the missing shard."""
    manifest = PreparedCorpus(corpus["prepared"]).manifest
    for shard in manifest.shards[-3:]:
        (corpus["prepared"] / shard.file).unlink()
    vocab = PreparedCorpus(corpus["prepared"]).vocab
    stream = TrainStream([corpus["prepared"]], "whitespace", vocab, BPTTConfig(2, 5))
    for _ in range(20):
        next(stream)
    with pytest.raises(InputFileError, match=f"{manifest.shards[-3].file} is missing"):
        for _ in range(1000):
            next(stream)


def test_damaged_or_foreign_parts_are_named(corpus, tmp_path):
    folder = corpus["prepared"]
    shard = folder / PreparedCorpus(folder).manifest.shards[0].file
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(InputFileError, match=f"{shard.name} is damaged"):
        next(PreparedCorpus(folder).sentences())

    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    manifest["shards"][0]["file"] = "../outside.xz"
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(InputFileError, match="names a shard outside its folder"):
        PreparedCorpus(folder)
    (folder / MANIFEST_NAME).write_text('{"format": "something else"}')
    with pytest.raises(InputFileError, match="is not the manifest of a prepared corpus"):
        PreparedCorpus(folder)

    other = tmp_path / "other"
    prepare_corpus([corpus["text"]], other)
    (other / "vocab.txt.xz").write_bytes(lzma.compress(b"<S>\n</S>\n<UNK>\nthe\n"))
    with pytest.raises(InputFileError, match="is not the vocabulary the corpus"):
        PreparedCorpus(other)


def test_options_that_contradict_a_prepared_corpus_are_refused(corpus, tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    Vocabulary(["<S>", "</S>", "<UNK>", "the"]).save(vocab_file)
    cases = [
        (dict(tokenizer="chars"), "was prepared with --tokenizer whitespace"),
        (dict(vocab=str(vocab_file)), "is not the vocabulary of the prepared corpus"),
        (dict(min_count=3), "brings its vocabulary (built with --min-count 1 --max-vocab 20)"),
    ]
    for options, message in cases:
        with pytest.raises(ElmoError, match=message.replace("(", r"\(").replace(")", r"\)")):
            run(tiny_config(corpus["prepared"], **options), tmp_path / "refused")
        assert not (tmp_path / "refused").exists()
    with pytest.raises(ElmoError, match="is read alone"):
        run(replace(tiny_config(corpus["prepared"]), train=[corpus["prepared"], corpus["text"]]),
            tmp_path / "refused")
    # the options it was prepared with are fine
    assert run(tiny_config(corpus["prepared"], max_vocab=20, max_steps=2),
               tmp_path / "ok").step == 2


def test_prepare_corpus_command(tmp_path, capsys):
    train, _ = write_corpus(tmp_path)
    out = tmp_path / "ids"
    argv = ["prepare-corpus", "--train", str(train), "--out", str(out), "--shard-tokens", "500"]
    assert main(argv) == 0
    words = len(train.read_text().split())
    shards = sorted(p.name for p in out.glob("shard-*"))
    assert f"200 sentences, {words:,} words in {len(shards)} shard(s)" in capsys.readouterr().err
    assert shards == [f"shard-{i:05d}.xz" for i in range(-(-words // 500))]
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", *shards, "vocab.txt.xz"]
    before = (out / MANIFEST_NAME).read_bytes()
    assert main(argv) == 1
    assert "pass --overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite", "--quiet"]) == 0
    assert (out / MANIFEST_NAME).read_bytes() == before  # the same corpus, the same files
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine\n")
    assert main(["prepare-corpus", "--train", str(train), "--out", str(tmp_path / "busy")]) == 1
    assert "holds files but no prepared corpus" in capsys.readouterr().err
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("vocab", [False, True], ids=["vocab-built", "vocab-given"])
def test_a_failed_preparation_leaves_nothing(tmp_path, capsys, vocab):
    """Input that is not text (here a zip archive) stops the command with the reader's
    message, and neither OUT nor its partial copy .OUT.new is left; an OUT that was there
    stays."""
    train, _ = write_corpus(tmp_path / "text")
    packed = tmp_path / "train.zip"
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(train, "train.txt")
    given = []
    if vocab:
        Vocabulary.build([line.split() for line in train.read_text().splitlines()]).save(
            tmp_path / "vocab.txt")
        given = ["--vocab", str(tmp_path / "vocab.txt")]
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = ["prepare-corpus", "--train", str(packed), *given, "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "ids")]) == 1
    assert re.search(r"train.zip, line \d+: not valid UTF-8", capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    (tmp_path / "mine").mkdir()
    assert main([*argv, "--out", str(tmp_path / "mine")]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "mine"])


# The child: SIGKILL itself when it is about to write its N-th shard, then run `elmo ARGS`.
DIES_AT_SHARD = """
import os, signal, sys
import elmo.data.shards as shards
real, count = shards.ShardWriter.close, [0]
def dying(self):
    count[0] += 1
    if count[0] == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self)
shards.ShardWriter.close = dying
from elmo.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(("kills", "options"), [
    ([1], []), ([3], []), ([3, 2], []), ([3, 2], ["--hold-out-every", "3"])],
    ids=["first-shard", "third", "twice", "twice-holding-out"])
def test_prepare_corpus_killed_resumes_to_the_same_files(tmp_path, capsys, kills, options):
    """The same files, the held-out text of --hold-out-every included."""
    corpus = write_documents(tmp_path)
    argv = ["prepare-corpus", "--train", str(corpus["jsonl"]), "--max-vocab", "20",
            "--shard-tokens", "150", *options]
    assert main([*argv, "--out", str(tmp_path / "reference"), "--quiet"]) == 0
    out = tmp_path / "ids"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    for n in kills:
        done = subprocess.run([sys.executable, "-c", DIES_AT_SHARD, str(n), *argv, "--out",
                               str(out), "--quiet"], env=env, timeout=300)
        assert done.returncode == -signal.SIGKILL and not (out / MANIFEST_NAME).exists()
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 0
    resumed = kills[-1] > 1
    assert ("resuming after" in capsys.readouterr().err) == resumed
    files = sorted(p.name for p in (tmp_path / "reference").iterdir())
    assert sorted(p.name for p in out.iterdir()) == files
    for name in files:
        assert (out / name).read_bytes() == (tmp_path / "reference" / name).read_bytes(), name
    assert not (tmp_path / ".ids.new").exists()
