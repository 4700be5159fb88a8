"""Models from and to the Hugging Face Hub (`hf:OWNER/REPO[/SUB/DIR][@REVISION]`), against the
Hub stand-in of tests/helpers/hub_standin.py on 127.0.0.1: nothing leaves the machine."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import yaml
from huggingface_hub import HfApi
from huggingface_hub import constants as hub_constants

from elmo import (
    Embedder,
    get_tokenizer,
    load_model,
    push_to_hub,
    save_bilm_tf,
    save_pretrained,
)
from elmo.chars import batch_to_ids
from elmo.cli import main
from elmo.extras import MissingExtraError
from elmo.loading.hf_hub import HubError, parse_hub_name
from elmo.loading.resolve import resolve_model
from tests.conftest import REPO, random_bilm, require_shared
from tests.helpers.hub_standin import TOKEN, HubStandIn
from tests.helpers.model_files import write_allennlp_archive, write_efml_dir

LINES = "The bank raised rates .\nabc bad cafe\nWe sat on the river bank .\n"
EXTRA_FILES = {"README.md": b"# a model\n", "notes/large.bin": b"\0" * 4096}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The stand-in, with huggingface_hub pointed at it (environment and, as it reads them
    once at import, its constants) and a cache of its own under tmp_path."""
    stand_in = HubStandIn()
    home = tmp_path / "hf-home"
    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    settings = {"HF_ENDPOINT": stand_in.url, "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1",
                "HF_HUB_DISABLE_TELEMETRY": "1"}
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    for name, value in {
        "ENDPOINT": stand_in.url,
        "HUGGINGFACE_CO_URL_TEMPLATE": stand_in.url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
        "HF_TOKEN_PATH": str(home / "token"), "HF_STORED_TOKENS_PATH": str(home / "tokens"),
        "HF_HUB_OFFLINE": False, "HF_HUB_DISABLE_XET": True,
    }.items():
        monkeypatch.setattr(hub_constants, name, value)
    yield stand_in
    stand_in.close()


def go_offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)


def with_token(monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)


def embed(tmp_path: Path, model: str | Path, *options: str) -> dict[str, np.ndarray]:
    """`elmo embed MODEL` of LINES -> {dataset: array}."""
    source = tmp_path / "input.txt"
    source.write_text(LINES, encoding="utf-8")
    out = tmp_path / f"out{len(list(tmp_path.glob('out*.hdf5')))}.hdf5"
    assert main(["embed", str(model), str(source), str(out), "--quiet", *options]) == 0
    with h5py.File(out, "r") as f:
        return {key: f[key][()] for key in f}


def assert_same_vectors(a: dict, b: dict) -> None:
    assert a.keys() == b.keys() and len(a) == 4  # 3 lines + sentence_to_index
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def layers(bilm) -> torch.Tensor:
    with torch.no_grad():
        return bilm(batch_to_ids([["The", "bank", "."], ["a"]])).layers


def fetched(hub: HubStandIn) -> set[str]:
    """The repo files asked for so far (HEAD or GET of resolve; LFS files then come from the
    CDN)."""
    return {path.split("/resolve/", 1)[1].split("/", 1)[1]
            for _, path in hub.requests if "/resolve/" in path}


# ---- each layout, loaded as `elmo embed` loads it from disk -------------------------------

def test_official_pair_at_the_root_and_in_a_subfolder(hub, tmp_path):
    pair = tmp_path / "pair"
    save_bilm_tf(random_bilm(seed=1), pair)
    hub.commit_folder("allenai/elmo-tiny", pair)
    hub.commit("allenai/elmo-tiny", EXTRA_FILES)
    hub.commit_folder("allenai/elmo-tiny", pair, prefix="models/copy/")
    local = embed(tmp_path, pair)
    assert_same_vectors(embed(tmp_path, "hf:allenai/elmo-tiny"), local)
    assert fetched(hub) == {"options.json", "weights.hdf5"}  # not README.md, not notes/
    assert_same_vectors(embed(tmp_path, "hf:allenai/elmo-tiny/models/copy"), local)
    files = resolve_model("hf:allenai/elmo-tiny/models/copy").local(progress=False)
    cache = Path(hub_constants.HF_HUB_CACHE)
    assert files.options.is_symlink() and cache in files.options.resolve().parents
    assert files.options.name == "options.json" and files.directory.name == "copy"


def test_allennlp_test_fixtures_as_the_hub_holds_them(hub, tmp_path):
    """lysandre/test-elmo-tiny's listing: AllenNLP's fixture folder (options.json and
    lm_weights.hdf5 beside sentences.json and four .hdf5 files of expected outputs) and a
    config/ folder."""
    fixtures = require_shared("fixtures", "bilm-tf", "allennlp_test_fixtures_elmo")
    hub.commit_folder("lysandre/test-elmo-tiny", fixtures)
    hub.commit("lysandre/test-elmo-tiny", {"config/characters_token_embedder.json": b"{}"})
    files = resolve_model("hf:lysandre/test-elmo-tiny")
    assert [p for p, _ in files.remote] == ["options.json", "lm_weights.hdf5"]
    local = load_model(options=fixtures / "options.json", weights=fixtures / "lm_weights.hdf5")
    torch.testing.assert_close(layers(load_model(files).bilm), layers(local.bilm))


def test_efml_directory(hub, tmp_path):
    model = write_efml_dir(tmp_path / "efml")
    hub.commit_folder("someone/efml-zh", model)
    hub.commit("someone/efml-zh", EXTRA_FILES)
    assert_same_vectors(embed(tmp_path, "hf:someone/efml-zh"), embed(tmp_path, model))
    assert "README.md" not in fetched(hub)


def test_native_directory_with_its_tokenizer_and_other_options(hub, tmp_path):
    model = save_pretrained(random_bilm(seed=2), tmp_path / "native")
    (model / "card.json").write_text(json.dumps({"tokenizer": "chars"}))
    hub.commit_folder("me/native", model)
    options = ("--batch-size", "1", "--layers", "average")
    remote = embed(tmp_path, "hf:me/native", *options)
    assert_same_vectors(remote, embed(tmp_path, model, *options))
    assert remote["0"].shape[0] == len("Thebankraisedrates.")  # split as recorded: chars
    assert load_model("hf:me/native").tokenizer == "chars"


def test_native_directory_in_shards(hub, tmp_path):
    model = save_pretrained(random_bilm(seed=2), tmp_path / "shards", max_shard_bytes=40_000)
    hub.commit_folder("me/shards", model)
    hub.commit("me/shards", EXTRA_FILES)
    assert_same_vectors(embed(tmp_path, "hf:me/shards"), embed(tmp_path, model))
    assert fetched(hub) == {p.name for p in model.iterdir()}  # config, index, every shard


def test_allennlp_archive(hub, tmp_path):
    bilm = random_bilm(seed=6)
    hub.commit_folder("lab/tagger", write_allennlp_archive(tmp_path / "archive", bilm))
    loaded = load_model("hf:lab/tagger", progress=False)
    assert loaded.format == "allennlp"
    torch.testing.assert_close(layers(loaded.bilm), layers(bilm))


def test_an_elmo_weights_th_alone(hub, tmp_path):
    bilm = random_bilm(seed=11)
    folder = write_allennlp_archive(tmp_path / "archive", bilm)  # weights.th + options.json
    (folder / "config.json").unlink()
    (folder / "README.md").write_text("# my ELMo\n")
    hub.commit_folder("lab/bare", folder)
    loaded = load_model("hf:lab/bare", progress=False)
    assert loaded.format == "allennlp"
    torch.testing.assert_close(layers(loaded.bilm), layers(bilm))


def test_a_pinned_revision_differs_from_main(hub, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    save_pretrained(random_bilm(seed=7), first)
    save_pretrained(random_bilm(seed=8), second)
    old = hub.commit_folder("me/moving", first)
    v1 = hub.commit_folder("me/moving", first, branch="v1")
    hub.commit_folder("me/moving", second)
    assert_same_vectors(embed(tmp_path, "hf:me/moving"), embed(tmp_path, second))
    assert_same_vectors(embed(tmp_path, f"hf:me/moving@{old}"), embed(tmp_path, first))
    assert_same_vectors(embed(tmp_path, "hf:me/moving@v1"), embed(tmp_path, first))
    assert resolve_model("hf:me/moving@v1").revision == v1 != old


# ---- the cache, offline --------------------------------------------------------------------

def test_offline_from_the_cache(hub, tmp_path, monkeypatch, capsys):
    model = save_pretrained(random_bilm(seed=9), tmp_path / "native")
    hub.commit_folder("me/cached", model)
    hub.commit_folder("me/uncached", model)
    hub.commit_folder("me/cached", model, branch="v2")
    online = embed(tmp_path, "hf:me/cached")
    embed(tmp_path, "hf:me/cached@v2")
    before = len(hub.requests)
    embed(tmp_path, "hf:me/cached")  # online again: one request, which commit main is
    assert [path for _, path in hub.requests[before:]] == ["/api/models/me/cached"]
    go_offline(monkeypatch)
    before = len(hub.requests)
    assert_same_vectors(embed(tmp_path, "hf:me/cached"), online)
    assert_same_vectors(embed(tmp_path, "hf:me/cached@v2"), online)
    assert len(hub.requests) == before  # resolution too needs no network
    for listing in Path(hub_constants.HF_HUB_CACHE).glob("models--me--cached/trees"):
        shutil.rmtree(listing)  # a cache that an older huggingface_hub wrote
    assert_same_vectors(embed(tmp_path, "hf:me/cached"), online)
    capsys.readouterr()
    assert main(["info", "hf:me/uncached"]) == 1
    err = capsys.readouterr().err
    assert "hf:me/uncached" in err and "HF_HUB_OFFLINE" in err and "Traceback" not in err


def test_an_unreachable_hub_with_the_ref_cached_but_not_the_files(hub, tmp_path,
                                                                   monkeypatch, capsys):
    """`elmo info` recorded which commit `dev` is and downloaded nothing; with the Hub out of
    reach, `elmo embed` says so in one line, at once (no retries), and once the files are
    cached it embeds them with a warning."""
    model = save_pretrained(random_bilm(seed=13), tmp_path / "native")
    hub.commit_folder("me/elmo-small", model, branch="dev")
    source = tmp_path / "in.txt"
    source.write_text(LINES, encoding="utf-8")
    assert main(["info", "hf:me/elmo-small@dev"]) == 0

    def unreachable(patch: pytest.MonkeyPatch) -> None:
        patch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
        patch.setattr(hub_constants, "ENDPOINT", "http://127.0.0.1:9")

    with monkeypatch.context() as patch:
        unreachable(patch)
        started = time.monotonic()
        err = _error(capsys, "embed", "hf:me/elmo-small@dev", str(source),
                     str(tmp_path / "o.hdf5"))
        assert time.monotonic() - started < 10
    assert err.startswith("elmo: error: could not reach the Hub (http://127.0.0.1:9)")
    assert "me/elmo-small at revision 'dev'" in err and "the cache does not hold it" in err
    assert len(err.strip().splitlines()) == 1
    online = embed(tmp_path, "hf:me/elmo-small@dev")
    unreachable(monkeypatch)
    capsys.readouterr()
    assert_same_vectors(embed(tmp_path, "hf:me/elmo-small@dev"), online)
    assert "elmo: warning: could not reach the Hub (http://127.0.0.1:9): hf:me/elmo-small@dev " \
        "is the commit" in capsys.readouterr().err


def test_the_command_honours_the_environment(hub, tmp_path):
    """`elmo embed` in a process of its own, configured by environment variables only: the
    cache is $HF_HUB_CACHE, and a cached model embeds with HF_HUB_OFFLINE=1."""
    model = save_pretrained(random_bilm(seed=10), tmp_path / "native")
    hub.commit_folder("me/env", model)
    (tmp_path / "in.txt").write_text(LINES, encoding="utf-8")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "elsewhere"),
           "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}",  # this checkout's elmo
           "OMP_NUM_THREADS": "1"}  # both runs on the same threads, however busy the host

    def run(*args, **extra):
        return subprocess.run([sys.executable, "-m", "elmo", *args], env={**env, **extra},
                              capture_output=True, text=True, timeout=300)

    done = run("embed", "hf:me/env", str(tmp_path / "in.txt"), str(tmp_path / "a.hdf5"),
               "--quiet")
    assert done.returncode == 0, done.stderr
    assert any((tmp_path / "elsewhere").glob("models--me--env/snapshots/*/model.safetensors"))
    offline = run("embed", "hf:me/env", str(tmp_path / "in.txt"), str(tmp_path / "b.hdf5"),
                  "--quiet", HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")
    assert offline.returncode == 0, offline.stderr
    assert "Could not reach" not in offline.stderr and "warning" not in offline.stderr
    with h5py.File(tmp_path / "a.hdf5") as a, h5py.File(tmp_path / "b.hdf5") as b:
        np.testing.assert_array_equal(a["1"][()], b["1"][()])
    missing = run("info", "hf:me/never", HF_HUB_OFFLINE="1")
    assert missing.returncode == 1 and "HF_HUB_OFFLINE" in missing.stderr
    assert "Traceback" not in missing.stderr


# ---- errors ----------------------------------------------------------------------------------

def _error(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_unknown_repo_and_revision_are_named(hub, tmp_path, capsys):
    hub.commit_folder("me/real", save_pretrained(random_bilm(), tmp_path / "m"))
    assert "me/nothing" in _error(capsys, "info", "hf:me/nothing")
    err = _error(capsys, "info", "hf:me/real@v9")
    assert "me/real" in err and "'v9'" in err
    assert "hf:OWNER/REPO" in _error(capsys, "info", "hf:just-a-name")


def test_private_and_gated_repos_need_a_token(hub, tmp_path, capsys, monkeypatch):
    model = save_pretrained(random_bilm(), tmp_path / "m")
    hub.commit_folder("me/secret", model, private=True)
    hub.commit_folder("org/gated", model, gated=True)
    err = _error(capsys, "info", "hf:me/secret")
    assert "me/secret" in err and "private" in err and "HF_TOKEN" in err
    err = _error(capsys, "embed", "hf:org/gated", str(tmp_path / "x.txt"), str(tmp_path / "o"))
    assert "org/gated is a gated repo" in err and "HF_TOKEN" in err
    with_token(monkeypatch)
    assert load_model("hf:me/secret").format == load_model("hf:org/gated").format == "native"


def test_an_undetectable_layout_lists_the_files_and_the_layouts(hub, capsys):
    hub.commit("me/data", {"corpus.txt": b"text\n", "a.json": b"{}", "b.json": b"{}"})
    err = _error(capsys, "info", "hf:me/data")
    for expected in ("corpus.txt", "a.json", ".gitattributes", "model.safetensors",
                     "char.dic", "weights.th", "options .json"):
        assert expected in err
    assert "has no folder 'sub'" in _error(capsys, "info", "hf:me/data/sub")


def test_an_empty_repo_holds_no_model(hub, capsys):
    hub.commit("me/empty", {})  # what the Hub creates: .gitattributes alone
    err = _error(capsys, "info", "hf:me/empty")
    assert "hf:me/empty (commit " in err and "holds no model: a model is in one of" in err
    assert "found .gitattributes" in err and "directory of its own" not in err


def test_a_broken_download_leaves_nothing_a_later_run_loads(hub, tmp_path, monkeypatch,
                                                            capsys):
    hub.commit_folder("me/flaky", save_pretrained(random_bilm(seed=11), tmp_path / "m"))
    hub.broken.add("me/flaky/model.safetensors")
    source = tmp_path / "in.txt"
    source.write_text(LINES, encoding="utf-8")
    err = _error(capsys, "embed", "hf:me/flaky", str(source), str(tmp_path / "o.hdf5"))
    assert "me/flaky" in err, err
    cache = Path(hub_constants.HF_HUB_CACHE) / "models--me--flaky"
    assert not list(cache.glob("snapshots/*/model.safetensors"))
    assert not (tmp_path / "o.hdf5").exists()
    with monkeypatch.context() as offline:
        go_offline(offline)
        err = _error(capsys, "embed", "hf:me/flaky", str(source), str(tmp_path / "o.hdf5"))
        assert "HF_HUB_OFFLINE" in err and "hf:me/flaky" in err
    hub.broken.clear()
    assert_same_vectors(embed(tmp_path, "hf:me/flaky"), embed(tmp_path, tmp_path / "m"))


def test_without_huggingface_hub_the_extra_is_named(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(MissingExtraError, match=r"elmo-bilm\[hub\]"):
        resolve_model("hf:me/model")
    assert "[hub]" in _error(capsys, "info", "hf:me/model")


@pytest.mark.parametrize("name", ["hf:", "hf:owner", "hf:owner/", "hf:/repo", "hf:o/r@"])
def test_malformed_names_are_refused(name):
    with pytest.raises(HubError, match="hf:OWNER/REPO"):
        parse_hub_name(name)


def test_names_parse_into_repo_folder_and_revision():
    name = parse_hub_name("hf:org/repo/sub/dir@refs/pr/3")
    assert (name.repo_id, name.subfolder, name.revision) == ("org/repo", "sub/dir", "refs/pr/3")
    assert str(name) == "hf:org/repo/sub/dir@refs/pr/3" and name.path("x") == "sub/dir/x"


# ---- info without downloading ----------------------------------------------------------------

def test_info_shows_layout_sizes_and_revision_without_downloading(hub, tmp_path, capsys):
    pair = tmp_path / "pair"
    options, weights = save_bilm_tf(random_bilm(), pair)
    commit = hub.commit_folder("allenai/pair", pair)
    hub.commit("allenai/pair", EXTRA_FILES, branch="docs")
    capsys.readouterr()
    assert main(["info", "hf:allenai/pair", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "bilm-tf" and info["architecture"] is None
    assert info["hub"] == {"repo": "allenai/pair", "folder": "", "revision": "main",
                           "commit": commit, "downloaded": False,
                           "files": {"options.json": options.stat().st_size,
                                     "weights.hdf5": weights.stat().st_size},
                           "bytes": options.stat().st_size + weights.stat().st_size}
    assert not fetched(hub) and not any("/lfs/" in path for _, path in hub.requests)
    assert main(["info", "hf:allenai/pair@docs"]) == 0
    out = capsys.readouterr().out
    assert "bilm-tf" in out and "docs (commit" in out and "not downloaded yet" in out
    load_model("hf:allenai/pair", progress=False)
    assert main(["info", "hf:allenai/pair", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["hub"]["downloaded"] and info["architecture"]["lstm_dim"] == 64


# ---- publishing ------------------------------------------------------------------------------

def _card(hub: HubStandIn, repo_id: str, branch: str = "main") -> tuple[dict, str]:
    repo = hub.repos[repo_id]
    text = repo.commits[repo.branches[branch]]["README.md"].decode()
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body


def test_export_to_the_hub_loads_back_to_the_same_vectors(hub, tmp_path, monkeypatch,
                                                          capsys):
    model = save_pretrained(random_bilm(seed=12), tmp_path / "native")
    (model / "card.json").write_text(json.dumps({"tokenizer": "whitespace",
                                                 "data_name": "tiny corpus"}))
    assert "HF_TOKEN" in _error(capsys, "export", str(model), "hf:me/published")
    with_token(monkeypatch)
    assert main(["export", str(model), "hf:me/published", "--private", "--license",
                 "apache-2.0", "--language", "en"]) == 0
    repo = hub.repos["me/published"]
    assert repo.private
    assert set(repo.commits[repo.branches["main"]]) == {
        ".gitattributes", "README.md", "card.json", "config.json", "model.safetensors"}
    assert_same_vectors(embed(tmp_path, "hf:me/published"), embed(tmp_path, model))
    metadata, body = _card(hub, "me/published")
    assert metadata["library_name"] == "elmo" and metadata["license"] == "apache-2.0"
    assert metadata["language"] == ["en"] and "elmo" in metadata["tags"]
    assert "tiny corpus" in body and "elmo embed hf:me/published" in body
    record = json.loads(repo.commits[repo.branches["main"]]["card.json"])
    assert record["tokenizer"] == "whitespace" and record["exported_from"] == str(model)


def test_publishing_again_and_to_a_branch_of_an_existing_repo(hub, tmp_path, monkeypatch):
    with_token(monkeypatch)
    first, second = tmp_path / "first", tmp_path / "second"
    save_pretrained(random_bilm(seed=14), first)
    save_pretrained(random_bilm(seed=15), second)
    for model, branch in ((first, ()), (second, ()), (first, ("--revision", "dev")),
                          (second, ("--revision", "dev"))):  # the repo, then the branch exist
        assert main(["export", str(model), "hf:me/again", *branch]) == 0
    assert set(hub.repos["me/again"].branches) == {"main", "dev"}
    assert_same_vectors(embed(tmp_path, "hf:me/again"), embed(tmp_path, second))
    assert_same_vectors(embed(tmp_path, "hf:me/again@dev"), embed(tmp_path, second))


def test_an_unexpected_error_of_a_library_names_the_step(hub, tmp_path, monkeypatch, capsys):
    with_token(monkeypatch)

    def no_url(*args, **kwargs):
        raise KeyError("url")

    monkeypatch.setattr(HfApi, "create_repo", no_url)
    err = _error(capsys, "export", str(save_pretrained(random_bilm(), tmp_path / "m")),
                 "hf:me/x")
    assert err == "elmo: error: publishing to hf:me/x: creating the repo me/x failed " \
        "(KeyError: 'url')\n"


def test_a_card_on_a_branch_loads_that_branch_in_the_models_language(hub, tmp_path,
                                                                     monkeypatch):
    with_token(monkeypatch)
    assert main(["export", "default", "hf:me/two"]) == 0
    assert main(["export", "default-zh", "hf:me/two", "--revision", "zh"]) == 0
    _, body = _card(hub, "me/two", "zh")
    usage = body[:body.index("# Shipped model")]
    assert "elmo embed hf:me/two@zh input.txt" in usage
    assert 'Embedder.from_pretrained("hf:me/two@zh")' in usage
    example = re.search(r'tokens = get_tokenizer\("chars"\)\("(.+)"\)', usage)
    assert example and all("\u4e00" <= ch <= "\u9fff" or ch == "。" for ch in example[1])
    tokens = get_tokenizer("chars")(example[1])
    copy = Embedder.from_pretrained("hf:me/two@zh")
    np.testing.assert_array_equal(copy.embed_sentence(tokens),
                                  Embedder.from_pretrained("default-zh").embed_sentence(tokens))
    _, main_body = _card(hub, "me/two")
    assert 'Embedder.from_pretrained("hf:me/two")' in main_body
    assert 'get_tokenizer("whitespace")("We sat on the river bank .")' in main_body


def test_an_efml_model_is_published_converted_not_as_pickles(hub, tmp_path, monkeypatch):
    with_token(monkeypatch)
    model = write_efml_dir(tmp_path / "efml")
    assert main(["export", str(model), "hf:me/efml-converted", "--format", "bilm-tf"]) == 1
    assert main(["export", str(model), "hf:me/efml-converted"]) == 0
    repo = hub.repos["me/efml-converted"]
    files = set(repo.commits[repo.branches["main"]])
    assert "model.safetensors" in files and not any(f.endswith(".pkl") for f in files)
    assert_same_vectors(embed(tmp_path, "hf:me/efml-converted"), embed(tmp_path, model))


def test_push_to_hub_on_a_branch_with_the_recorded_perplexity(hub, tmp_path, monkeypatch):
    with_token(monkeypatch)
    url = push_to_hub("default", "me/default-copy", revision="dev", progress=False)
    repo = hub.repos["me/default-copy"]
    assert url.endswith(repo.branches["dev"]) and "README.md" not in \
        repo.commits[repo.branches["main"]]
    copy = Embedder.from_pretrained("hf:me/default-copy@dev")
    original = Embedder.from_pretrained("default")
    sentence = ["The", "bank", "raised", "rates", "."]
    np.testing.assert_array_equal(copy.embed_sentence(sentence),
                                  original.embed_sentence(sentence))
    metadata, body = _card(hub, "me/default-copy", "dev")
    results = metadata["model-index"][0]["results"]
    shipped = json.loads((REPO / "src/elmo/pretrained/default/card.json").read_text())
    expected = round(shipped["perplexity"]["wikitext-2 valid"]["average"], 2)
    assert {"name": "wikitext-2 valid", "type": "wikitext-2 valid"} in \
        [r["dataset"] for r in results]
    assert expected in [m["value"] for r in results for m in r["metrics"]]
    assert "WikiText-2" in body  # the shipped model's own card follows the usage
