"""Tests for elmo.loading.releases against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from elmo.loading import download, releases
from tests.helpers.file_server import FileServer

DATA = os.urandom(300_000)
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def server() -> Iterator[FileServer]:
    srv = FileServer()
    srv.files["/data.bin"] = DATA
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ELMO_CACHE", str(cache))
    monkeypatch.delenv("ELMO_OFFLINE", raising=False)
    monkeypatch.delenv("ELMO_RELEASE_BASE_URL", raising=False)
    return cache


def sidecar(p: Path) -> Path:
    return p.with_name(p.name + ".sha256")


def part(p: Path) -> Path:
    return p.with_name(p.name + ".part")


def assert_complete(dest: Path) -> None:
    assert dest.read_bytes() == DATA
    assert sidecar(dest).read_text() == SHA + "\n"
    assert not part(dest).exists()


# --- cache_dir -------------------------------------------------------------------------


def test_cache_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert releases.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("ELMO_CACHE")
    assert releases.cache_dir() == tmp_path / "xdg" / "elmo"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert releases.cache_dir() == tmp_path / "home" / ".cache" / "elmo"


def test_released_models_table() -> None:
    assert set(releases.RELEASED_MODELS) == {"small", "medium", "original", "original-5.5B",
                                             "seqvec"}
    small = releases.RELEASED_MODELS["small"]
    assert small.options_url == (
        "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x1024_128_2048cnn_1xhighway/"
        "elmo_2x1024_128_2048cnn_1xhighway_options.json"
    )
    big = releases.RELEASED_MODELS["original-5.5B"]
    assert big.weights_url.endswith(
        "/2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5"
    )
    with pytest.raises(AttributeError):
        small.name = "x"  # type: ignore[misc]


# --- download --------------------------------------------------------------------------


def test_download_fresh(server: FileServer, env: Path, capsys: pytest.CaptureFixture) -> None:
    dest = env / "sub" / "data.bin"
    assert releases.download(server.url("/data.bin"), dest, sha256=SHA) == dest
    assert_complete(dest)
    assert server.requests == [("/data.bin", None)]
    assert "data.bin" in capsys.readouterr().err  # the progress bar goes to stderr
    # Second call: verified from the cache, no network.
    releases.download(server.url("/data.bin"), dest, progress=False)
    assert len(server.requests) == 1


def test_resume_after_interrupted_connection(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    server.cut_after = 100_000
    with pytest.raises(releases.DownloadError) as err:
        releases.download(server.url("/data.bin"), dest, progress=False)
    msg = str(err.value)
    assert server.url("/data.bin") in msg and "300000" in msg and "100000" in msg
    assert not dest.exists()
    assert part(dest).stat().st_size == 100_000

    releases.download(server.url("/data.bin"), dest, progress=False, sha256=SHA)
    assert_complete(dest)
    assert server.requests[-1] == ("/data.bin", "bytes=100000-")


def test_resume_leftover_part(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    env.mkdir()
    part(dest).write_bytes(DATA[:123_456])
    releases.download(server.url("/data.bin"), dest, progress=False)
    assert_complete(dest)
    assert server.requests == [("/data.bin", "bytes=123456-")]


def test_server_ignoring_range_restarts(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    env.mkdir()
    part(dest).write_bytes(b"x" * 50_000)  # garbage: must be overwritten, not appended to
    server.ignore_range = True
    releases.download(server.url("/data.bin"), dest, progress=False)
    assert_complete(dest)
    assert server.requests == [("/data.bin", "bytes=50000-")]


def test_leftover_part_already_complete(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    env.mkdir()
    part(dest).write_bytes(DATA)
    releases.download(server.url("/data.bin"), dest, progress=False)  # server answers 416
    assert_complete(dest)


def test_leftover_part_too_long_restarts(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    env.mkdir()
    part(dest).write_bytes(DATA + b"junk")
    releases.download(server.url("/data.bin"), dest, progress=False)
    assert_complete(dest)
    assert [r for _, r in server.requests] == ["bytes=300004-", None]


def test_size_mismatch(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    server.announce_extra = 10
    with pytest.raises(releases.DownloadError) as err:
        releases.download(server.url("/data.bin"), dest, progress=False)
    msg = str(err.value)
    assert server.url("/data.bin") in msg and "300010" in msg and "300000" in msg
    assert not dest.exists() and not sidecar(dest).exists()


def test_checksum_mismatch(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    with pytest.raises(releases.DownloadError, match="checksum mismatch"):
        releases.download(server.url("/data.bin"), dest, progress=False, sha256="0" * 64)
    assert not dest.exists() and not part(dest).exists() and not sidecar(dest).exists()


def test_corrupt_cached_file_detected(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    releases.download(server.url("/data.bin"), dest, progress=False)
    dest.write_bytes(b"y" + DATA[1:])
    with pytest.raises(releases.DownloadError, match=r"corrupt \(sha256 .*delete it to download"):
        releases.download(server.url("/data.bin"), dest, progress=False)
    assert len(server.requests) == 1
    dest.unlink()
    releases.download(server.url("/data.bin"), dest, progress=False)
    assert_complete(dest)


def test_http_error(server: FileServer, env: Path) -> None:
    url = server.url("/missing.bin")
    with pytest.raises(releases.DownloadError, match="404") as err:
        releases.download(url, env / "missing.bin", progress=False)
    assert url in str(err.value)
    assert not (env / "missing.bin").exists()


def test_connection_refused(env: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/data.bin"
    with pytest.raises(releases.DownloadError, match="could not be reached") as err:
        releases.download(url, env / "data.bin", progress=False)
    assert url in str(err.value)


def test_timeout_keeps_partial_data(
    server: FileServer, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download, "TIMEOUT", 0.3)
    server.stall = True
    dest = env / "data.bin"
    with pytest.raises(releases.DownloadError, match="timed out") as err:
        releases.download(server.url("/data.bin"), dest, progress=False)
    assert "resume" in str(err.value)
    assert part(dest).stat().st_size == 1000
    server.release.set()
    server.stall = False
    releases.download(server.url("/data.bin"), dest, progress=False)
    assert_complete(dest)
    assert server.requests[-1] == ("/data.bin", "bytes=1000-")


# --- offline ---------------------------------------------------------------------------


def test_offline_missing(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    dest = env / "data.bin"
    url = "http://127.0.0.1:9/data.bin"
    with pytest.raises(releases.OfflineError) as err:
        releases.download(url, dest, progress=False)
    assert isinstance(err.value, releases.DownloadError)
    msg = str(err.value)
    assert str(dest) in msg and url in msg and "ELMO_OFFLINE" in msg


def test_offline_cached(server: FileServer, env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = env / "data.bin"
    url = server.url("/data.bin")
    releases.download(url, dest, progress=False)
    server.close()
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    assert releases.download(url, dest, progress=False) == dest
    # A file put in place by hand (no .sha256) is used as is when offline.
    manual = env / "manual.bin"
    manual.write_bytes(b"hand-made")
    assert releases.download("http://127.0.0.1:9/manual.bin", manual, progress=False) == manual


# --- resolve_released ------------------------------------------------------------------


def serve_release(server: FileServer, model: releases.ReleasedModel) -> dict[str, bytes]:
    contents = {}
    for url, payload in ((model.options_url, b'{"lstm": {}}'), (model.weights_url, DATA)):
        rel = url.removeprefix(releases.DEFAULT_BASE_URL)
        server.files["/mirror" + rel] = payload
        contents[url.rsplit("/", 1)[-1]] = payload
    return contents


def test_resolve_released(server: FileServer, env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = releases.RELEASED_MODELS["small"]
    contents = serve_release(server, model)
    monkeypatch.setenv("ELMO_RELEASE_BASE_URL", server.url("/mirror/"))
    options, weights = releases.resolve_released("small", progress=False)
    assert options == env / "small" / "elmo_2x1024_128_2048cnn_1xhighway_options.json"
    assert weights == env / "small" / "elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5"
    for p in (options, weights):
        assert p.read_bytes() == contents[p.name]
        assert sidecar(p).exists()
    assert sorted(path for path, _ in server.requests) == sorted(
        p for p in server.files if p.startswith("/mirror/")
    )

    # Cached now: works offline without the server.
    server.close()
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    assert releases.resolve_released("small", progress=False) == (options, weights)


def test_resolve_released_offline_names_path(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    with pytest.raises(releases.OfflineError) as err:
        releases.resolve_released("medium", progress=False)
    msg = str(err.value)
    assert str(env / "medium" / "elmo_2x2048_256_2048cnn_1xhighway_options.json") in msg
    assert releases.RELEASED_MODELS["medium"].options_url in msg


def test_resolve_unknown_name() -> None:
    with pytest.raises(ValueError) as err:
        releases.resolve_released("huge")
    msg = str(err.value)
    assert "'huge'" in msg
    for name in releases.RELEASED_MODELS:
        assert name in msg
    assert not isinstance(err.value, KeyError)


def test_released_name_downloads_and_embeds(
    server: FileServer, env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`Embedder.from_pretrained("medium")` end to end, against a real (tiny) official pair."""
    from elmo import save_bilm_tf
    from elmo.embed import Embedder
    from tests.conftest import random_bilm

    model = random_bilm(seed=31)
    options, weights = save_bilm_tf(model, tmp_path / "made")
    release = releases.RELEASED_MODELS["medium"]
    for url, path in ((release.options_url, options), (release.weights_url, weights)):
        server.files["/mirror" + url.removeprefix(releases.DEFAULT_BASE_URL)] = path.read_bytes()
    monkeypatch.setenv("ELMO_RELEASE_BASE_URL", server.url("/mirror/"))
    got = Embedder.from_pretrained("medium").embed_sentence(["river", "bank"])
    expected = Embedder(model).embed_sentence(["river", "bank"])
    assert got.shape == (3, 2, 32)
    assert abs(got - expected).max() == 0.0


# --- seqvec: another host, the authors' MD5s ------------------------------------------------


def test_seqvec_is_the_authors_files_with_their_md5s() -> None:
    seqvec = releases.RELEASED_MODELS["seqvec"]
    base = "https://rostlab.org/~deepppi/embedding_repo/embedding_models/seqvec"
    assert (seqvec.options_url, seqvec.weights_url) == (f"{base}/options.json",
                                                       f"{base}/weights.hdf5")
    assert seqvec.options_md5 == "cede355187778de3ac302a83c761f5f9"
    assert seqvec.weights_md5 == "0249d59249a50b43b79f641ff2ba7e88"


def test_md5_mismatch_deletes_the_download(server: FileServer, env: Path) -> None:
    dest = env / "data.bin"
    with pytest.raises(releases.DownloadError, match="expected md5 0{32}, got"):
        releases.download(server.url("/data.bin"), dest, progress=False, md5="0" * 32)
    assert not dest.exists() and not part(dest).exists() and not sidecar(dest).exists()
    md5 = hashlib.md5(DATA).hexdigest()
    assert releases.download(server.url("/data.bin"), dest, progress=False, md5=md5) == dest
    assert_complete(dest)


def test_hand_placed_file_with_another_md5_is_downloaded_again(server: FileServer,
                                                               env: Path) -> None:
    dest = env / "data.bin"
    env.mkdir()
    dest.write_bytes(b"an older file")
    releases.download(server.url("/data.bin"), dest, progress=False,
                      md5=hashlib.md5(DATA).hexdigest())
    assert_complete(dest)


def test_seqvec_by_name_on_a_mirror(server: FileServer, env: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`seqvec` is fetched from $ELMO_RELEASE_BASE_URL/seqvec/, its MD5s checked: files that
    are not the authors' are refused (and deleted); with their MD5s in the entry, they load."""
    import dataclasses

    from elmo import save_bilm_tf
    from elmo.embed import Embedder
    from tests.conftest import random_bilm

    model = random_bilm(seed=37)
    options, weights = save_bilm_tf(model, tmp_path / "made")
    server.files["/mirror/seqvec/options.json"] = options.read_bytes()
    server.files["/mirror/seqvec/weights.hdf5"] = weights.read_bytes()
    monkeypatch.setenv("ELMO_RELEASE_BASE_URL", server.url("/mirror/"))
    with pytest.raises(releases.DownloadError, match="expected md5 cede355187778de3ac302a83c"):
        Embedder.from_pretrained("seqvec")
    assert not list((env / "seqvec").iterdir())
    ours = dataclasses.replace(releases.RELEASED_MODELS["seqvec"],
                               options_md5=hashlib.md5(options.read_bytes()).hexdigest(),
                               weights_md5=hashlib.md5(weights.read_bytes()).hexdigest())
    monkeypatch.setitem(releases.RELEASED_MODELS, "seqvec", ours)
    got = Embedder.from_pretrained("seqvec").embed_sentence(list("MKVLA"))
    np.testing.assert_array_equal(got, Embedder(model).embed_sentence(list("MKVLA")))
    assert sorted(p.name for p in (env / "seqvec").iterdir()) == [
        "options.json", "options.json.sha256", "weights.hdf5", "weights.hdf5.sha256"]
