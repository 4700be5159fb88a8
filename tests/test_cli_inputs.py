"""What a new user meets (issue 12): every subcommand on bad input, output safety, readers,
run tokenizers, shard identity, the Python API's type errors, and the expected options."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

import elmo
from elmo import Embedder, batch_to_ids, save_bilm_tf, save_pretrained
from elmo.cli import main
from elmo.io.atomic import claim_output
from elmo.vocab import Vocabulary
from tests.conftest import REPO, random_bilm

LINES = ["the cat sat on the mat .", "北京 欢迎 你", "a", "bank of the river"]


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(*args) -> int:
    """The CLI in-process; a usage error's SystemExit becomes its exit code."""
    try:
        return main([str(a) for a in args])
    except SystemExit as exit_info:
        return exit_info.code


@pytest.fixture
def model_dir(tmp_path):
    return save_pretrained(random_bilm(seed=11), tmp_path / "model")


def _run_dir(path, tokenizer: str):
    """A run directory as `elmo train` leaves it: model with softmax, vocab.txt, run.json."""
    bilm = random_bilm(seed=5)
    words = ["<S>", "</S>", "<UNK>", *"北京欢迎你", "北京", "欢迎"]
    torch.manual_seed(0)
    softmax = {"softmax.weight": torch.randn(len(words), 16),
               "softmax.bias": torch.zeros(len(words))}
    save_pretrained(bilm, path, extra_tensors=softmax)
    Vocabulary(words).save(path / "vocab.txt")
    (path / "run.json").write_text(json.dumps({"config": {"tokenizer": tokenizer}}))
    return path


@pytest.fixture
def env(tmp_path, model_dir):
    """Files the bad inputs below refer to by name."""
    _write(tmp_path / "in.txt", LINES)
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "adir").mkdir()
    _run_dir(tmp_path / "run", "chars")
    for i in range(2):
        assert _run("embed", model_dir, tmp_path / "in.txt", tmp_path / f"p{i}.hdf5", "--quiet",
                    "--num-shards", 2, "--shard-index", i) == 0
    other = save_pretrained(random_bilm(seed=3, projection_dim=8), tmp_path / "other")
    assert _run("embed", other, tmp_path / "in.txt", tmp_path / "q1.hdf5", "--quiet",
                "--num-shards", 2, "--shard-index", 1) == 0
    return {"MODEL": model_dir}


BAD_INPUTS = [
    # (argv, exit code, message on stderr)
    (["embed", "MODEL", "in.txt", "in.txt"], 1, "is also an input"),
    (["vocab", "--train", "in.txt", "--out", "in.txt"], 1, "is also an input"),
    (["merge", "p0.hdf5", "p0.hdf5", "p1.hdf5"], 1, "is also an input"),
    (["embed", "MODEL", "in.txt", "adir"], 1, "is a directory"),
    (["merge", "adir", "p0.hdf5", "p1.hdf5"], 1, "is a directory"),
    (["vocab", "--train", "in.txt", "--out", "adir"], 1, "is a directory"),
    (["export", "MODEL", "in.txt"], 1, "is a file"),
    (["export", "MODEL", "MODEL"], 1, "is also an input"),
    (["vocab", "--train", "adir", "--out", "v.txt"], 1, "is a directory"),
    (["perplexity", "run", "adir"], 1, "is a directory"),
    (["embed", "MODEL", "adir", "o.hdf5"], 1, "is a directory"),
    (["embed", "MODEL", "in.txt", "in.txt/o.hdf5"], 1, "a file has that name"),
    (["embed", "MODEL", "empty.txt", "o.hdf5"], 1, "is empty"),
    (["vocab", "--train", "empty.txt", "--out", "v.txt"], 1, "no sentences"),
    (["perplexity", "run", "empty.txt"], 1, "no sentences"),
    (["embed", "MODEL", "-", "o.hdf5"], 1, "save the text to a file"),
    (["embed", "MODEL", "in.txt", "o.hdf5", "--num-shards", "2"], 2, "needs --shard-index"),
    (["embed", "MODEL", "in.txt", "o.hdf5", "--num-shards", "0"], 2,
     "--num-shards must be at least 1"),
    (["embed", "MODEL", "in.txt", "o.hdf5", "--batch-size", "0"], 2,
     "--batch-size must be at least 1"),
    (["embed", "MODEL", "in.txt", "out", "--ray", "--batch-size", "0"], 2,
     "--batch-size, --workers and --block-lines must be at least 1"),
    (["embed", "MODEL", "in.txt", "o.hdf5", "--num-shards", "2", "--shard-index", "2"], 1,
     "--shard-index must be in 0..1"),
    (["merge", "m.hdf5", "p0.hdf5", "q1.hdf5"], 1, "model_sha256"),
    (["merge", "m.hdf5", "p0.hdf5"], 1, "shards 0..1 once each; got [0]"),
    (["merge", "m.hdf5", "in.txt"], 1, "not an HDF5 file"),
    (["export", "MODEL", "x", "--threads", "0"], 2, "--threads must be at least 1"),
    (["train", "--train", "adir", "--out", "r", "--quiet"], 1, "is a directory"),
    (["train", "--train", "-", "--out", "r", "--quiet"], 1, "cannot read stdin"),
    (["train", "--train", "in.txt", "--valid", "adir", "--out", "r", "--quiet"], 1,
     "is a directory"),
]


@pytest.mark.parametrize("argv, code, message", BAD_INPUTS,
                         ids=[" ".join(a) for a, _, _ in BAD_INPUTS])
def test_bad_input_gets_a_message_never_a_traceback(tmp_path, env, capsys, monkeypatch, argv,
                                                    code, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RANK", raising=False)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert _run(*[env.get(a, a) for a in argv]) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert ("elmo: error:" in err) if code == 1 else (f"elmo {argv[0]}: error:" in err)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before, "a refused command changes no file"
    assert not list(tmp_path.glob("*.partial")) and not list(tmp_path.glob("*.lock"))


def test_existing_output_needs_overwrite(tmp_path, model_dir, capsys):
    src = _write(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    out.write_bytes(b"precious")
    assert _run("embed", model_dir, src, out, "--quiet") == 1
    assert "already exists: pass --overwrite" in capsys.readouterr().err
    assert out.read_bytes() == b"precious"
    assert _run("embed", model_dir, src, out, "--quiet", "--overwrite") == 0
    with h5py.File(out, "r") as f:
        assert len(f) == len(LINES) + 1
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("mine\n")
    assert _run("vocab", "--train", src, "--out", vocab, "--quiet") == 1
    assert vocab.read_text() == "mine\n"
    assert _run("vocab", "--train", src, "--out", vocab, "--quiet", "--overwrite") == 0
    assert vocab.read_text().startswith("<S>\n</S>\n<UNK>\n")
    assert _run("export", model_dir, tmp_path / "exp") == 0
    assert _run("export", model_dir, tmp_path / "exp") == 1
    assert "already exist" in capsys.readouterr().err


def test_export_says_which_format_it_wrote_and_why(tmp_path, model_dir, capsys):
    assert _run("export", model_dir, tmp_path / "m3") == 0  # no .onnx: bilm-tf, said so
    assert capsys.readouterr().err.startswith(
        "wrote bilm-tf (the default for an OUTDIR not ending in .onnx; --format native or onnx "
        f"for another): {tmp_path / 'm3' / 'options.json'}, ")
    assert _run("export", model_dir, tmp_path / "m4", "--format", "native") == 0
    assert capsys.readouterr().err.startswith(f"wrote native: {tmp_path / 'm4'}")


def test_unwritable_output_directory_is_a_message(tmp_path, model_dir, capsys, monkeypatch):
    src = _write(tmp_path / "in.txt", LINES)
    (tmp_path / "ro").mkdir()
    if os.geteuid() != 0:
        (tmp_path / "ro").chmod(0o555)
    else:  # root writes anywhere: stand in for a read-only directory
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).endswith("ro")
                            else real(p, mode))
    for argv in (["embed", model_dir, src, tmp_path / "ro/out.hdf5", "--quiet"],
                 ["vocab", "--train", src, "--out", tmp_path / "ro/v.txt"],
                 ["export", model_dir, tmp_path / "ro/exp"]):
        assert _run(*argv) == 1
        err = capsys.readouterr().err
        assert "cannot write in" in err and "Traceback" not in err
    assert not list((tmp_path / "ro").iterdir())


def test_second_writer_of_an_output_is_refused_and_changes_nothing(tmp_path, model_dir, capsys):
    src = _write(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    partial = tmp_path / "out.hdf5.partial"
    with claim_output(out):  # the first process, still writing its partial file
        partial.write_bytes(b"first writer's work")
        assert _run("embed", model_dir, src, out, "--quiet") == 1
        assert f"another process is writing {out}" in capsys.readouterr().err
        assert partial.read_bytes() == b"first writer's work" and not out.exists()
    assert not (tmp_path / "out.hdf5.lock").exists()
    partial.unlink()
    assert _run("embed", model_dir, src, out, "--quiet") == 0  # the lock is gone with it


def test_run_tokenizer_is_the_default_and_tokenizer_overrides(tmp_path, capsys):
    run = _run_dir(tmp_path / "run", "chars")
    src = _write(tmp_path / "zh.txt", ["北京欢迎你"])
    assert _run("embed", run, src, tmp_path / "a.hdf5", "--quiet") == 0
    assert _run("embed", run, src, tmp_path / "b.hdf5", "--quiet", "--tokenizer",
                "whitespace") == 0
    with h5py.File(tmp_path / "a.hdf5", "r") as a, h5py.File(tmp_path / "b.hdf5", "r") as b:
        assert a["0"].shape[1] == 5 and b["0"].shape[1] == 1
    assert Embedder.from_pretrained(run).tokenizer == "chars"
    tokens = []
    for extra in ([], ["--tokenizer", "whitespace"]):
        assert _run("perplexity", run, src, "--json", "--quiet", *extra) == 0
        tokens.append(json.loads(capsys.readouterr().out)["tokens"])
    assert tokens == [6, 2]  # 5 characters + </S>; one "word" + </S>


def test_merge_refuses_shards_of_another_input_or_model(tmp_path, model_dir, capsys):
    a = _write(tmp_path / "a.txt", LINES)
    b = _write(tmp_path / "b.txt", [*LINES[:3], "another last line"])
    other = save_pretrained(random_bilm(seed=4), tmp_path / "other")  # same shapes
    for name, model, src in (("a", model_dir, a), ("b", model_dir, b), ("o", other, a)):
        for i in range(2):
            assert _run("embed", model, src, tmp_path / f"{name}{i}.hdf5", "--quiet",
                        "--num-shards", 2, "--shard-index", i) == 0
    assert _run("merge", tmp_path / "m.hdf5", tmp_path / "a0.hdf5", tmp_path / "b1.hdf5") == 1
    assert "input_sha256 differ" in capsys.readouterr().err
    assert _run("merge", tmp_path / "m.hdf5", tmp_path / "a0.hdf5", tmp_path / "o1.hdf5") == 1
    assert "model_sha256 differ" in capsys.readouterr().err
    assert not (tmp_path / "m.hdf5").exists()
    assert _run("merge", tmp_path / "m.hdf5", tmp_path / "a1.hdf5", tmp_path / "a0.hdf5") == 0


def _datasets(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][...] for k in f}, dict(f.attrs)


def test_bom_gzip_and_crlf_read_as_plain_text(tmp_path, model_dir):
    plain = _write(tmp_path / "plain.txt", LINES)
    text = ("\ufeff" + "\r\n".join(LINES) + "\r\n").encode("utf-8")
    (tmp_path / "bom.txt").write_bytes(text)
    (tmp_path / "in.txt.gz").write_bytes(gzip.compress(text))
    for name in ("plain.txt", "bom.txt", "in.txt.gz"):
        assert _run("embed", model_dir, tmp_path / name, tmp_path / f"{name}.hdf5", "--quiet") == 0
    expected, _ = _datasets(tmp_path / "plain.txt.hdf5")
    for name in ("bom.txt", "in.txt.gz"):
        got, _ = _datasets(tmp_path / f"{name}.hdf5")
        assert got.keys() == expected.keys()
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])
    for name in (plain, tmp_path / "in.txt.gz"):
        assert _run("vocab", "--train", name, "--out", tmp_path / f"{name.name}.vocab",
                    "--quiet") == 0
    assert (tmp_path / "plain.txt.vocab").read_text() == (tmp_path / "in.txt.gz.vocab").read_text()


def test_shards_need_an_index_and_name_rank(tmp_path, model_dir, capsys, monkeypatch):
    src = _write(tmp_path / "in.txt", LINES)
    monkeypatch.setenv("RANK", "abc")
    assert _run("embed", model_dir, src, tmp_path / "o{shard}.hdf5", "--num-shards", 2) == 2
    assert "RANK='abc'" in capsys.readouterr().err
    monkeypatch.setenv("RANK", "1")
    assert _run("embed", model_dir, src, tmp_path / "o.hdf5", "--num-shards", 2) == 2
    assert "'{shard}'" in capsys.readouterr().err
    assert not list(tmp_path.glob("o*"))


@contextlib.contextmanager
def _killed_at_batch(n: int):
    """Within the block, the n-th batch embedded raises KeyboardInterrupt (a kill)."""
    calls, real = [], Embedder.embed_batch

    def dying(self, sentences):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(self, sentences)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Embedder, "embed_batch", dying)
        yield


def test_shards_and_resume_equal_one_process_bit_for_bit(tmp_path, model_dir, monkeypatch):
    lines = [f"line {i} " + f"word{i % 13} " * (i % 9) for i in range(70)]
    src = _write(tmp_path / "in.txt", lines)
    options = ["--quiet", "--batch-size", 2]  # chunks of 32 lines
    assert _run("embed", model_dir, src, tmp_path / "single.hdf5", *options) == 0
    for rank in range(3):
        assert _run("embed", model_dir, src, tmp_path / f"part{rank}.hdf5", *options,
                    "--num-shards", 3, "--shard-index", rank) == 0
    assert _run("merge", tmp_path / "merged.hdf5",
                *[tmp_path / f"part{r}.hdf5" for r in range(3)]) == 0
    with _killed_at_batch(25):
        assert _run("embed", model_dir, src, tmp_path / "resumed.hdf5", *options) == 130
    assert _run("embed", model_dir, src, tmp_path / "resumed.hdf5", "--batch-size", 2) == 0
    single, _ = _datasets(tmp_path / "single.hdf5")
    for name in ("merged.hdf5", "resumed.hdf5"):
        other, attrs = _datasets(tmp_path / name)
        assert other.keys() == single.keys() and attrs == {}
        for key in single:
            np.testing.assert_array_equal(other[key], single[key], err_msg=f"{name} {key}")


def test_resume_says_where_and_counts_all_empty_lines(tmp_path, model_dir, monkeypatch, capsys):
    lines = ["", "x y"] * 20
    src = _write(tmp_path / "in.txt", lines)
    with _killed_at_batch(20):
        assert _run("embed", model_dir, src, tmp_path / "o.hdf5", "--batch-size", 1) == 130
    capsys.readouterr()
    assert _run("embed", model_dir, src, tmp_path / "o.hdf5", "--batch-size", 1) == 0
    err = capsys.readouterr().err
    assert "resuming" in err and "16 of 40 lines were embedded before" in err
    assert "20 empty lines (the first: line 1)" in err


def test_python_api_type_errors_and_empty_input(model_dir):
    embedder = Embedder.from_pretrained(model_dir)
    with pytest.raises(TypeError, match="not the string 'The bank'"):
        embedder.embed_sentence("The bank")
    with pytest.raises(TypeError, match=r"token 0 is 1 \(int\)"):
        embedder.embed_sentence([1, 2])
    with pytest.raises(TypeError, match="sentence 1 must be a list of tokens"):
        embedder.embed_sentences([["a"], "b c"])
    with pytest.raises(TypeError, match="list of sentences"):
        embedder.embed_sentences("a b")
    with pytest.raises(TypeError, match="not the string"):
        batch_to_ids(["ab"])
    with pytest.raises(TypeError, match="must be a BiLM"):
        Embedder("default")
    assert embedder.embed_sentences([]) == []
    bilm = random_bilm()
    out = bilm(batch_to_ids([]))
    assert out.layers.shape == (3, 0, 0, 32) and out.mask.shape == (0, 0)


def test_stdin_and_stdout(tmp_path, capsys, monkeypatch):
    run = _run_dir(tmp_path / "run", "chars")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(
        "北京 欢迎\n北京\n".encode()))))
    assert _run("vocab", "--train", "-", "--out", "-", "--quiet") == 0
    assert capsys.readouterr().out == "<S>\n</S>\n<UNK>\n北京\n欢迎\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(
        gzip.compress("北京欢迎你\n".encode())))))
    assert _run("perplexity", run, "-", "--json", "--quiet") == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == 6


def test_version_threads_dtype_and_native_export(tmp_path, model_dir, capsys):
    assert _run("--version") == 0
    assert capsys.readouterr().out.strip() == f"elmo {elmo.__version__}"
    src = _write(tmp_path / "in.txt", LINES)
    threads = torch.get_num_threads()
    try:
        assert _run("embed", model_dir, src, tmp_path / "h.hdf5", "--quiet", "--dtype",
                    "float16", "--threads", 2) == 0
        assert torch.get_num_threads() == 2
        assert _run("--threads", 1, "export", model_dir, tmp_path / "e") == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    full = Embedder.from_pretrained(model_dir).embed_sentence(LINES[0].split())
    with h5py.File(tmp_path / "h.hdf5", "r") as f:
        assert f["0"].dtype == np.float16
        np.testing.assert_allclose(f["0"][...], full, rtol=1e-3, atol=1e-3)
    save_bilm_tf(random_bilm(seed=12), tmp_path / "official")
    assert _run("export", tmp_path / "official", tmp_path / "native", "--format", "native") == 0
    assert (tmp_path / "native/config.json").is_file()
    a = Embedder.from_pretrained(tmp_path / "official").embed_sentence(["a", "b"])
    b = Embedder.from_pretrained(tmp_path / "native").embed_sentence(["a", "b"])
    np.testing.assert_array_equal(a, b)
    assert callable(elmo.get_tokenizer("chars")) and "jieba" in elmo.TOKENIZER_NAMES


def test_errors_after_parsing_show_the_subcommands_usage(tmp_path, model_dir, capsys):
    assert _run("embed", model_dir, tmp_path / "in.txt", "o.hdf5", "--batch-size", 0) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: elmo embed [options] MODEL INPUT OUTPUT")
    assert "[[MODEL]" not in err
    assert _run("vocab", "--train", "x", "--out", "y", "--min-count", 0) == 2
    assert capsys.readouterr().err.startswith("usage: elmo vocab")


def test_token_vector_does_not_depend_on_how_many_are_encoded_with_it():
    """The last bits of a token vector once depended on its group's size (1-15 rows take
    other kernels), which made resumed and sharded runs differ from one-process runs."""
    from elmo import load_model

    encoder = load_model("default").bilm.token_encoder
    words = [f"w{i}ord{'s' * (i % 11)}" for i in range(300)]
    ids = batch_to_ids([words])[0]
    with torch.inference_mode():
        together = encoder(ids)
        for group in ([0], [5, 17, 3], list(range(40, 55)), list(range(100, 300))):
            torch.testing.assert_close(encoder(ids[group]), together[group], rtol=0, atol=0)


def test_a_lock_is_its_holders_flock_not_a_word_in_a_message(tmp_path, model_dir, capsys):
    """Another process holding the output's lock is refused, its partial work untouched;
    once that process is killed its lock is gone with it (the kernel drops the flock)."""
    import signal
    import subprocess

    src = _write(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    partial = tmp_path / "out.hdf5.partial"
    partial.mkdir()
    (partial / "work").write_text("the holder's work")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from elmo.io.atomic import output_lock\n"
         "with output_lock(sys.argv[1]):\n print('locked', flush=True); time.sleep(60)",
         str(out)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert _run("embed", model_dir, src, out, "--quiet") == 1
        assert f"another process is writing {out}" in capsys.readouterr().err
        assert (partial / "work").read_text() == "the holder's work" and not out.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / "out.hdf5.lock").exists()  # left by the killed holder
    assert _run("embed", model_dir, src, out, "--quiet") == 0
    assert not partial.exists() and not (tmp_path / "out.hdf5.lock").exists()


SWALLOWING_IMPORT = """
import os, signal, sys
from importlib.abc import MetaPathFinder

class Swallowing(MetaPathFinder):  # an import whose bare `except:` swallows Ctrl-C
    def find_spec(self, name, path, target=None):
        if name == "elmo.cli":
            try:
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(1000))  # the handler runs here, inside the try
            except:  # noqa: E722
                pass

sys.meta_path.insert(0, Swallowing())
from elmo.__main__ import main
sys.exit(main(["--help"]))
"""


def test_ctrl_c_that_an_import_swallows_still_exits_130():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SWALLOWING_IMPORT], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 130 and done.stderr.strip() == "elmo: interrupted"


def test_ctrl_c_while_torch_imports_exits_130_quietly(tmp_path):
    """SIGINT in the first seconds of `elmo ...`, while torch is being imported: status 130 and
    one line, no traceback (`python -X importtime` says when torch's import has begun)."""
    src = _write(tmp_path / "in.txt", LINES)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "elmo", "embed", "default", str(src),
         str(tmp_path / "out.hdf5")], stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in process.stderr:  # a torch submodule imported: torch's import is under way
            if line.startswith("import time:") and line.rstrip().split("| ")[-1].lstrip() \
                    .startswith("torch."):
                process.send_signal(signal.SIGINT)
                break
        else:
            pytest.fail("torch was not imported")
        rest = [line for line in process.stderr if not line.startswith("import time:")]
        assert process.wait(timeout=120) == 130
    finally:
        process.kill()
    assert len(rest) == 1 and rest[0].startswith("elmo: interrupted")  # one line, no traceback
    assert not (tmp_path / "out.hdf5").exists()
