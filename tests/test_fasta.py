"""FASTA input (issue 37): the reader, `elmo embed` on proteins (datasets by record id, layer
sums, pooling, long records in bounded memory, resuming, shards) and `elmo train` on FASTA."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import h5py
import numpy as np
import pytest

from elmo import save_bilm_tf, save_pretrained
from elmo.cli import main
from elmo.data.corpus import iter_sentences
from elmo.embed import Embedder
from elmo.errors import InputFileError
from elmo.io.fasta import dataset_name, is_fasta_path, read_fasta, scan_fasta
from elmo.loading import load_pretrained
from tests.conftest import random_bilm

HBA = "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHFDLSHGSAQVKGHGKKVADALTNAVAHVDDMPNALSALSDLHAHKL"
RECORDS = [("sp|P69905|HBA_HUMAN", "Hemoglobin subunit alpha OS=Homo sapiens", HBA),
           ("ab/cd", "", "MKV"),
           ("x%y", "a description  with  spaces", "ACDEFGHIKLMNPQRSTVWYXBZUO")]


def fasta_text(records=RECORDS, width: int = 60, newline: str = "\n", blank: bool = False
               ) -> str:
    out = []
    for ident, description, sequence in records:
        out.append(f">{ident} {description}".rstrip())
        out += [sequence[i:i + width] for i in range(0, len(sequence), width)]
        if blank:
            out.append("")
    return newline.join(out) + newline


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_pretrained(random_bilm(seed=3), tmp_path_factory.mktemp("m") / "model")


@pytest.fixture(scope="module")
def embedder(model_dir):
    return Embedder.from_pretrained(model_dir)


# ---- the reader ----------------------------------------------------------------------------

@pytest.mark.parametrize("width, newline, gz, blank", [
    (60, "\n", False, False), (7, "\r\n", False, False), (1000, "\n", True, False),
    (13, "\n", False, True),
])
def test_records_are_read_whatever_the_wrapping(tmp_path, width, newline, gz, blank):
    text = fasta_text(width=width, newline=newline, blank=blank)
    path = tmp_path / ("p.fa.gz" if gz else "p.fa")
    if gz:
        with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
            f.write(text)
    else:
        path.write_bytes(text.encode())
    records = list(read_fasta(path))
    assert [(r.id, r.description, r.sequence) for r in records] == RECORDS
    assert records[0].line == 1


def test_missing_final_newline_and_blank_lines_between_records(tmp_path):
    path = tmp_path / "p.fasta"
    path.write_text("\n>a first\nMK\nV\n\n\n>b\nAA", encoding="utf-8")
    assert [(r.id, r.sequence, r.line) for r in read_fasta(path)] == [("a", "MKV", 2),
                                                                       ("b", "AA", 7)]


@pytest.mark.parametrize("text, message", [
    (">a\nMKV\n>b\nAA\n>a dup\nCC\n", r"line 5: record 'a' repeats the id of the record at "
                                       r"line 1"),
    (">a\nMKV\n>b\n>c\nAA\n", r"line 3: record 'b' has no sequence"),
    (">a\nMKV\n>b\n", r"line 3: record 'b' has no sequence"),
    ("MKV\n>a\nAA\n", r"line 1: sequence before any header"),
    (">a\nMKV\nAA*\n", r"line 3, column 3: record 'a' holds '\*', which is not a letter"),
    (">a\nMK-V\n", r"line 2, column 3: record 'a' holds '-'"),
    (">a\nMK1V\n", r"line 2, column 3: record 'a' holds '1'"),
    (">\nMKV\n", r"line 1: a header without an id"),
])
def test_each_malformed_record_is_named_with_its_line(tmp_path, text, message):
    path = tmp_path / "bad.fasta"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputFileError, match=message):
        list(read_fasta(path))


def test_lowercase_is_kept_with_one_warning_naming_the_first_record(tmp_path):
    path = tmp_path / "p.fasta"
    path.write_text(">a\nMKV\n>b\nmkv\n>c\naa\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"record 'b' \(line 3\) has lowercase") as caught:
        summary = scan_fasta(path)
    assert len(caught) == 1 and list(summary.lengths) == [3, 3, 2]
    assert [r.sequence for r in read_fasta(path)] == ["MKV", "mkv", "aa"]


def test_names_and_extensions():
    assert dataset_name("sp|P69905|HBA_HUMAN") == "sp|P69905|HBA_HUMAN"
    assert dataset_name("ab/cd") == "ab%2Fcd" and dataset_name("x%2Fy") == "x%252Fy"
    assert dataset_name(".") == "%2E"
    for name in ("a.fasta", "a.FA", "a.faa.gz", "a.fas"):
        assert is_fasta_path(name)
    assert not is_fasta_path("a.txt") and not is_fasta_path("fasta.txt")


# ---- elmo embed ----------------------------------------------------------------------------

def test_embed_writes_a_dataset_per_record_named_by_its_id(tmp_path, model_dir, embedder):
    src = tmp_path / "p.fasta"
    src.write_text(fasta_text(), encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(model_dir), str(src), str(out), "--quiet"]) == 0
    with h5py.File(out, "r") as f:
        assert sorted(f) == sorted(["sp|P69905|HBA_HUMAN", "ab%2Fcd", "x%25y"])
        for ident, description, sequence in RECORDS:
            data = f[dataset_name(ident)]
            assert data.attrs["id"] == ident and data.attrs["description"] == description
            assert data.dtype == np.float32 and data.shape == (3, len(sequence), 32)
            np.testing.assert_allclose(data[...], embedder.embed_sentence(list(sequence)),
                                       atol=1e-5)
    assert not list(tmp_path.glob("*.partial"))


def test_per_protein_vectors_are_seqvecs_sum_then_mean(tmp_path, model_dir, embedder):
    src = tmp_path / "proteins.txt"  # not named as FASTA: --format says it
    src.write_text(fasta_text(), encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(model_dir), str(src), str(out), "--quiet", "--format", "fasta",
                 "--layers", "sum", "--pool", "mean", "--dtype", "float16"]) == 0
    with h5py.File(out, "r") as f:
        got = f["sp|P69905|HBA_HUMAN"][...]
    assert got.shape == (32,) and got.dtype == np.float16
    expected = embedder.embed_sentence(list(HBA)).sum(0).mean(0)
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3)


LONG = ">z\n" + "ACDE" * 3000 + "\n"  # the problem is found after this record


@pytest.mark.parametrize("text, message", [
    (LONG + ">a\nMKV\n>a\nAA\n", "record 'a' repeats the id"),
    (LONG + ">a\nMKV\n>b\n", "record 'b' has no sequence"),
    ("MKV\n" + LONG, "sequence before any header"),
    (LONG + ">a\nMKV*\n", "which is not a letter"),
    ("\n\n", "has no FASTA record"),
])
def test_a_malformed_file_is_refused_before_anything_is_written(tmp_path, model_dir, capsys,
                                                                 text, message):
    src = tmp_path / "bad.fasta"
    src.write_text(text, encoding="utf-8")
    assert main(["embed", str(model_dir), str(src), str(tmp_path / "o.hdf5")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.fasta"]


def test_sentence_keys_are_refused_for_fasta(tmp_path, model_dir, capsys):
    src = tmp_path / "p.fasta"
    src.write_text(fasta_text(), encoding="utf-8")
    assert main(["embed", str(model_dir), str(src), str(tmp_path / "o.hdf5"),
                 "--use-sentence-keys"]) == 1
    assert "named by its id" in capsys.readouterr().err


def _peak_numpy_bytes(embedder, src, out) -> int:
    tracemalloc.start()
    try:
        embedder.embed_file(src, out, progress=False, overwrite=True)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_long_records_are_embedded_in_bounded_memory(tmp_path, model_dir):
    """A chunk holds at most 16 x max_tokens residues (a longer record alone): the peak memory
    does not grow with the number of long records (numpy's allocations, which tracemalloc
    sees, hold every computed layer)."""
    embedder = Embedder.from_pretrained(model_dir, batch_size=8, max_tokens=40)  # 640 a chunk
    batches = []
    real = embedder.embed_batch
    embedder.embed_batch = lambda sentences: batches.append([len(s) for s in sentences]) or \
        real(sentences)
    peaks = []
    for count in (2, 8):
        src = tmp_path / f"long{count}.fasta"
        src.write_text("".join(f">r{i}\n{'MKVL' * 150}\n" for i in range(count)) +
                       ">titin\n" + "ACDEFGHIKL" * 300 + "\n", encoding="utf-8")
        peaks.append(_peak_numpy_bytes(embedder, src, tmp_path / "out.hdf5"))
    assert all(sum(b) + 2 * len(b) <= 40 or len(b) == 1 for b in batches)
    assert [3000] in batches  # the longest record ran alone
    assert peaks[1] < 1.3 * peaks[0], peaks  # 4x the records, not 4x the memory


def test_killed_fasta_run_resumes_and_counts_residues(tmp_path, model_dir, monkeypatch, capsys):
    records = [(f"p{i}", "", "MKVLA"[: i % 5 + 1] * 20) for i in range(40)]
    src = tmp_path / "p.faa"
    src.write_text(fasta_text(records), encoding="utf-8")
    out = tmp_path / "out.hdf5"
    calls = []
    real = Embedder.embed_batch

    def dying(self, sentences):
        calls.append(len(sentences))
        if len(calls) == 20:  # in the second chunk of 16 records
            raise KeyboardInterrupt  # stands for a kill in the middle of the run
        return real(self, sentences)

    monkeypatch.setattr(Embedder, "embed_batch", dying)
    argv = ["embed", str(model_dir), str(src), str(out), "--batch-size", "1"]
    assert main(argv + ["--quiet"]) == 130
    monkeypatch.setattr(Embedder, "embed_batch", real)
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "16 of 40 records were embedded before" in err and "residue/s" in err
    embedder = Embedder.from_pretrained(model_dir)
    with h5py.File(out, "r") as f:
        assert len(f) == 40
        for ident, _, sequence in records:
            np.testing.assert_allclose(f[ident][...], embedder.embed_sentence(list(sequence)),
                                       atol=1e-5)


def test_fasta_shards_merge_into_the_one_process_file(tmp_path, model_dir):
    records = [(f"q{i}|x", f"d{i}", "ACDEFGH"[: i % 7 + 1] * 3) for i in range(9)]
    src = tmp_path / "p.fasta"
    src.write_text(fasta_text(records), encoding="utf-8")
    argv = ["embed", str(model_dir), str(src), "--quiet", "--batch-size", "1"]
    assert main(argv[:3] + [str(tmp_path / "one.hdf5")] + argv[3:]) == 0
    for i in range(2):
        assert main(argv[:3] + [str(tmp_path / f"part{i}.hdf5")] + argv[3:] +
                    ["--num-shards", "2", "--shard-index", str(i)]) == 0
    assert main(["merge", str(tmp_path / "merged.hdf5"), str(tmp_path / "part0.hdf5"),
                 str(tmp_path / "part1.hdf5")]) == 0
    with h5py.File(tmp_path / "one.hdf5", "r") as a, h5py.File(tmp_path / "merged.hdf5") as b:
        assert sorted(a) == sorted(b) == sorted(ident for ident, _, _ in records)
        for name in a:
            np.testing.assert_array_equal(a[name][...], b[name][...])
            assert dict(a[name].attrs) == dict(b[name].attrs)


# ---- elmo train -----------------------------------------------------------------------------

def test_a_fasta_corpus_is_a_sentence_per_record(tmp_path):
    path = tmp_path / "uniref_sample.fasta"
    path.write_text(">a x\nMK\nV\n>b\nAA\n>a again\nC\n", encoding="utf-8")  # ids may repeat
    assert list(iter_sentences(path, "chars")) == [["M", "K", "V"], ["A", "A"], ["C"]]


def test_train_a_protein_bilm_on_fasta(tmp_path):
    rng = np.random.default_rng(0)
    train, valid = tmp_path / "train.fasta", tmp_path / "valid.fa"
    for path, n in ((train, 60), (valid, 8)):
        path.write_text("".join(
            f">r{i}\n{''.join(rng.choice(list('ACDEFGHIKLMNPQRSTVWY'), rng.integers(20, 80)))}\n"
            for i in range(n)), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "--train", str(train), "--valid", str(valid), "--out", str(out),
                 "--tokenizer", "chars", "--preset", "tiny", "--batch-size", "4",
                 "--unroll-steps", "10", "--max-steps", "3", "--quiet"]) == 0
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert set("ACDEFGHIKLMNPQRSTVWY") <= set(vocab)
    assert json.loads((out / "run.json").read_text())["config"]["tokenizer"] == "chars"
    bilm, _ = load_pretrained(out)
    layers = Embedder(bilm).embed_sentence(list("MKVLA"))
    assert layers.shape == (bilm.num_layers, 5, bilm.config.output_dim)
    # continued training from an official pair, as from `seqvec`
    pair = tmp_path / "pair"
    save_bilm_tf(random_bilm(seed=9), pair)
    assert main(["train", "--train", str(train), "--out", str(tmp_path / "continued"),
                 "--tokenizer", "chars", "--init-from", str(pair), "--batch-size", "4",
                 "--unroll-steps", "10", "--max-steps", "2", "--quiet"]) == 0
