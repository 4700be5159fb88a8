"""The smaller defects of issue 23 (item 12), each as a new user met it."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest
import torch

from elmo import Embedder, device, save_pretrained
from elmo.analysis import plots
from elmo.cli import main
from elmo.device import ThreadChoice, default_threads
from elmo.embedding.settings import EmbedSettings
from elmo.errors import ElmoError
from tests.conftest import random_bilm
from tests.helpers.tasks import CONLLU, task_args


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_pretrained(random_bilm(seed=7), tmp_path_factory.mktemp("m") / "model")


def _layer_run(root):
    path = root / "run"
    path.mkdir()
    (path / "layer_weights.json").write_text(json.dumps({"input": [0.2, 0.3, 0.5]}))
    return path


def test_layer_weights_plot_is_not_replaced_without_overwrite(tmp_path, capsys):
    run = _layer_run(tmp_path)
    png = tmp_path / "w.png"
    png.write_bytes(b"my figure")
    assert main(["analyze", "layer-weights", str(run), "--plot", str(png)]) == 1
    assert "already exists" in capsys.readouterr().err and png.read_bytes() == b"my figure"
    assert main(["analyze", "layer-weights", str(run), "--plot", str(png), "--overwrite"]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_heat_map_of_one_run_keeps_its_y_label_inside(tmp_path, monkeypatch):
    inside = []
    original = plots._save

    def spy(figure, path):
        figure.tight_layout()
        figure.canvas.draw()
        box = figure.axes[0].yaxis.label.get_window_extent()
        inside.append(box.y0 >= 0 and box.y1 <= figure.bbox.y1)
        return original(figure, path)

    monkeypatch.setattr(plots, "_save", spy)
    assert main(["analyze", "layer-weights", str(_layer_run(tmp_path)), "--plot",
                 str(tmp_path / "w.png")]) == 0
    assert inside == [True]


def test_label_text_predicted_without_a_placeholder_warns(tmp_path, capsys):
    assert main(task_args("classification", tmp_path, "none", epochs=1)) == 0
    (tmp_path / "raw.txt").write_text("anna saw good\nthe bob bad\nin rome good\n",
                                      encoding="utf-8")
    capsys.readouterr()
    assert main(["task", "predict", str(tmp_path / "run"), str(tmp_path / "raw.txt"),
                 str(tmp_path / "out.txt")]) == 0
    err = capsys.readouterr().err
    assert "3 lines start with a word that is not one of the run's labels" in err, err
    assert "placeholder" in err
    # one placeholder for every line is the documented way: no warning
    (tmp_path / "raw.txt").write_text("_ anna saw good\n_ the bob bad\n", encoding="utf-8")
    assert main(["task", "predict", str(tmp_path / "run"), str(tmp_path / "raw.txt"),
                 str(tmp_path / "out2.txt")]) == 0
    assert "placeholder" not in capsys.readouterr().err


def test_a_conll_file_read_as_label_text_warns(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    conll = [f"{w}{i} NNP I-NP {'I-ORG' if i % 3 else 'O'}" for i in range(60)
             for w in ("EU", "rejects")]  # each row a "label" and a "sentence" of 3 words
    (tmp_path / "train").write_text("\n".join(conll) + "\n", encoding="utf-8")
    main(args)
    err = capsys.readouterr().err
    assert "120 distinct labels, 120 of them on one line only" in err, err
    assert "check --format" in err


def test_a_missing_tsv_label_column_is_named(tmp_path, capsys):
    args = task_args("pair", tmp_path, "none", epochs=1)
    args[args.index("--label-column") + 1] = "gold"
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "no column 'gold' in the header" in err and "--label-column" in err, err


def test_elmo_mix_layer_k_is_checked_without_a_made_up_bound(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    assert main([*args, "--elmo-mix", "layer:-1"]) == 1
    err = capsys.readouterr().err
    assert "999" not in err and "layer:K" in err and "K >= 0" in err, err


def test_a_bad_fractions_value_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "sample-efficiency", "--out", str(tmp_path / "o"), "--fractions",
              "a", "--", "--task", "tagging"])
    err = capsys.readouterr().err
    assert "_floats" not in err and "--fractions" in err and "'a'" in err, err


def test_an_unwritable_output_names_the_output_not_its_lock(tmp_path, model_dir, capsys,
                                                            monkeypatch):
    import os

    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    real = os.open

    def refusing(path, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    assert main(["embed", str(model_dir), str(src), str(tmp_path / "x.hdf5"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"cannot write {tmp_path / 'x.hdf5'}" in err and ".lock" not in err, err


def test_an_output_under_a_file_is_named(tmp_path, model_dir, capsys):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    (tmp_path / "file").write_text("x")
    assert main(["embed", str(model_dir), str(src), str(tmp_path / "file/x.hdf5"),
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'file'}" in err and "a file" in err, err


def test_task_commands_non_utf8_hint_names_the_option_they_have(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    (tmp_path / "train").write_bytes(b"pos good\nneg \xff bad\n")
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "--encoding-errors replace" in err and "elmo embed" not in err, err


def test_python_api_overwrite_hint_names_the_argument(tmp_path, model_dir):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    embedder = Embedder.from_pretrained(model_dir)
    embedder.embed_file(src, tmp_path / "o.hdf5", progress=False)
    with pytest.raises(ElmoError, match="overwrite=True"):
        embedder.embed_file(src, tmp_path / "o.hdf5", progress=False)


def test_fine_tune_computes_no_feature_cache(tmp_path, model_dir):
    args = task_args("classification", tmp_path, str(model_dir), epochs=1) + ["--fine-tune"]
    assert main(args) == 0
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(cache.rglob("*.hdf5*"))
    # the layer scales are those the cache would give: 1 / RMS over the training file
    from safetensors.torch import load_file

    from elmo.tasks.data import flat_sentences
    from elmo.tasks.features import cached_layers
    from elmo.tasks.readers import read_label_text

    store = cached_layers(model_dir, flat_sentences(read_label_text(tmp_path / "train")),
                          tmp_path / "other", progress=False)
    saved = load_file(str(tmp_path / "run" / "model.safetensors"))
    assert saved["elmo.scalar_mix_0.layer_scales"].tolist() == pytest.approx(
        [1 / r for r in store.layer_rms], rel=1e-5)


def test_probe_fitting_shows_progress(tmp_path, model_dir, capsys):
    data = tmp_path / "toy.conllu"
    data.write_text(CONLLU, encoding="utf-8")
    assert main(["analyze", "probe", "--model", str(model_dir), "--train", str(data),
                 "--test", str(data)]) == 0
    assert "fitting probes" in capsys.readouterr().err


# ---- issue 69: what a new user met --------------------------------------------------------

def test_int8_and_precision_help_link_to_the_tables_without_figures():
    """A figure lives in one table (docs/speed.md); the help links to it."""
    fields = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(EmbedSettings)}
    for name in ("quantize", "precision"):
        assert "docs/speed.md" in fields[name], name
        assert not re.search(r"\d(\.\d+)?x\b|%|~\d", fields[name]), fields[name]


def test_perplexity_help_says_a_shipped_name_works(capsys):
    with pytest.raises(SystemExit):
        main(["perplexity", "--help"])
    helps = " ".join(capsys.readouterr().out.split())
    assert "a shipped name (default, default-zh), a directory written by `elmo train`" in helps


def machine(monkeypatch, tmp_path, cores: int, load: float, runnable: int) -> None:
    """A host of `cores` cores, a 1-minute load average `load` and `runnable` processes
    runnable now besides this one."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"{load} {load} {load} {runnable + 1}/300 4242\n")
    monkeypatch.setattr(device, "LOADAVG", str(loadavg))


@pytest.mark.parametrize(("cores", "load", "runnable", "small", "want"), [
    (2, 0.2, 0, False, ThreadChoice(None)),  # idle: torch's choice, one per core
    (2, 0.8, 0, False, ThreadChoice(None)),  # the load a command that just ended left
    (2, 1.7, 3, False, (1.7, 1)), (8, 3.2, 5, False, (3.2, 5)),  # busy: the idle cores
    (2, 9.0, 1, False, (1.0, 1)),  # no more busy than the processes runnable now
    (2, 0.2, 0, True, ThreadChoice(1))])  # task, analyze: one thread
def test_the_default_threads_are_the_idle_cores_at_start(monkeypatch, tmp_path, cores, load,
                                                          runnable, small, want):
    machine(monkeypatch, tmp_path, cores, load, runnable)
    got = default_threads(small_model=small)
    if isinstance(want, tuple):
        busy, threads = want
        assert got == ThreadChoice(threads, f"the machine is busy (other work keeps {busy:.1f} "
                                            f"of its {cores} cores busy): using {threads} "
                                            f"thread{'s' * (threads > 1)}, as more would wait "
                                            "on each other; --threads N to choose")
    else:
        assert got == want
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's: torch follows it
    assert default_threads(small_model=small) == ThreadChoice(None)


def test_a_command_on_a_busy_machine_says_so_and_uses_the_idle_cores(
        tmp_path, model_dir, monkeypatch, capsys):
    machine(monkeypatch, tmp_path, 2, 2.6, 4)
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    argv = ["embed", str(model_dir), str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"),
            "--overwrite"]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert main(argv) == 0
        assert torch.get_num_threads() == 1
        assert "elmo: note: the machine is busy (other work keeps 2.6 of its 2 cores busy): " \
            "using 1 thread" in capsys.readouterr().err
        torch.set_num_threads(2)
        assert main(["--threads", "2", *argv]) == 0  # told: no note, as told
        assert torch.get_num_threads() == 2 and "busy" not in capsys.readouterr().err
        assert main([*argv, "--quiet"]) == 0
        assert "busy" not in capsys.readouterr().err
    finally:
        torch.set_num_threads(threads)

