"""Released ELMo models by name, downloaded on first use into a local cache.

Files are fetched with the standard library (``urllib``) into ``cache_dir()/<name>/``.
Interrupted downloads are resumed with HTTP ``Range`` requests, sizes are checked against
what the server announced, and a ``<file>.sha256`` sidecar is written next to every
completed file so that later corruption of the cache is detected.

Environment variables:

``ELMO_CACHE``
    Cache directory (default ``$XDG_CACHE_HOME/elmo`` or ``~/.cache/elmo``).
``ELMO_OFFLINE``
    When set to ``1`` (or ``true``/``yes``/``on``), never touch the network; only files
    already in the cache are used.
``ELMO_RELEASE_BASE_URL``
    Replaces the official ``https://s3-us-west-2.amazonaws.com/allennlp/models/elmo``
    prefix of the release URLs (for mirrors and tests); the files of a release hosted
    elsewhere (``seqvec``) are then fetched from ``$ELMO_RELEASE_BASE_URL/<name>/<file name>``
    and the ELMoForManyLangs archives from ``$ELMO_RELEASE_BASE_URL/efml/<archive name>``.

Where the authors published an MD5 of a file (SeqVec's, with its Kipoi model), the download
is checked against it too before it is used.

The ELMoForManyLangs models (``efml:<lang>``, see :data:`EFML_RELEASES`) are archives: each
is downloaded as above into ``cache_dir()/efml/`` and unpacked once into a temporary
directory beside its final place, which is then renamed into place.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from elmo.errors import ElmoError

__all__ = [
    "DEFAULT_BASE_URL",
    "EFML_RELEASES",
    "RELEASED_MODELS",
    "DownloadError",
    "EfmlRelease",
    "OfflineError",
    "ReleasedModel",
    "cache_dir",
    "download",
    "is_offline",
    "release_base_url",
    "resolve_efml",
    "resolve_released",
]

DEFAULT_BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
"""Official location of the AllenNLP ELMo releases."""

TIMEOUT = 60.0
"""Seconds to wait for the server to connect or to send more data."""

_CHUNK = 1 << 16
_USER_AGENT = "elmo-bilm (+python urllib)"
_TRUE = {"1", "true", "yes", "on"}


class DownloadError(ElmoError):
    """A file could not be downloaded (network failure, bad size or checksum, ...)."""


class OfflineError(DownloadError):
    """A file is not cached and ``ELMO_OFFLINE`` forbids downloading it."""


@dataclass(frozen=True)
class ReleasedModel:
    """A released ELMo model: its name, the official URLs of its two files and, where the
    authors published them, their MD5s."""

    name: str
    options_url: str
    weights_url: str
    options_md5: str | None = None
    weights_md5: str | None = None


def _release(name: str, stem: str) -> ReleasedModel:
    prefix = f"{DEFAULT_BASE_URL}/{stem}/elmo_{stem}"
    return ReleasedModel(name, f"{prefix}_options.json", f"{prefix}_weights.hdf5")


_SEQVEC = "https://rostlab.org/~deepppi/embedding_repo/embedding_models/seqvec"
RELEASED_MODELS: dict[str, ReleasedModel] = {
    m.name: m
    for m in (
        _release("small", "2x1024_128_2048cnn_1xhighway"),
        _release("medium", "2x2048_256_2048cnn_1xhighway"),
        _release("original", "2x4096_512_2048cnn_2xhighway"),
        _release("original-5.5B", "2x4096_512_2048cnn_2xhighway_5.5B"),
        # SeqVec (Heinzinger et al. 2019): the protein biLM, trained on UniRef50; the
        # authors' files and the MD5s published with its Kipoi model (docs/proteins.md).
        ReleasedModel("seqvec", f"{_SEQVEC}/options.json", f"{_SEQVEC}/weights.hdf5",
                      options_md5="cede355187778de3ac302a83c761f5f9",
                      weights_md5="0249d59249a50b43b79f641ff2ba7e88"),
    )
}


@dataclass(frozen=True)
class EfmlRelease:
    """A released ELMoForManyLangs model: its name (``efml:<lang>``), language and archive."""

    name: str
    language: str
    url: str


_NLPL = "http://vectors.nlpl.eu/repository/11"
# (code, language) by NLPL repository id, 136-179, as the package's README lists them.
_NLPL_LANGUAGES = (
    ("ar", "Arabic"), ("bg", "Bulgarian"), ("ca", "Catalan"), ("cs", "Czech"),
    ("cu", "Old Church Slavonic"), ("da", "Danish"), ("de", "German"), ("el", "Greek"),
    ("en", "English"), ("es", "Spanish"), ("et", "Estonian"), ("eu", "Basque"),
    ("fa", "Persian"), ("fi", "Finnish"), ("fr", "French"), ("ga", "Irish"),
    ("gl", "Galician"), ("grc", "Ancient Greek"), ("he", "Hebrew"), ("hi", "Hindi"),
    ("hr", "Croatian"), ("hu", "Hungarian"), ("id", "Indonesian"), ("it", "Italian"),
    ("ja", "Japanese"), ("ko", "Korean"), ("la", "Latin"), ("lv", "Latvian"),
    ("nl", "Dutch"), ("nb", "Norwegian Bokmål"), ("nn", "Norwegian Nynorsk"),
    ("pl", "Polish"), ("pt", "Portuguese"), ("ro", "Romanian"), ("ru", "Russian"),
    ("sk", "Slovak"), ("sl", "Slovene"), ("sv", "Swedish"), ("tr", "Turkish"),
    ("ug", "Uyghur"), ("uk", "Ukrainian"), ("ur", "Urdu"), ("vi", "Vietnamese"),
    ("zht", "Chinese (traditional, Wikipedia)"),
)
EFML_RELEASES: dict[str, EfmlRelease] = {
    r.name: r
    for r in (
        *(EfmlRelease(f"efml:{code}", language, f"{_NLPL}/{number}.zip")
          for number, (code, language) in enumerate(_NLPL_LANGUAGES, start=136)),
        EfmlRelease("efml:zhs", "Chinese (simplified, Xinhua news)",
                    "http://39.96.43.154/zhs.model.tar.bz2"),
    )
}
"""The ELMoForManyLangs releases by name: 44 languages on the NLPL repository, plus the
simplified-Chinese model hosted by its authors."""


def cache_dir() -> Path:
    """Directory for downloaded models: ``$ELMO_CACHE``, else ``$XDG_CACHE_HOME/elmo``,
    else ``~/.cache/elmo``. It is not created here."""
    explicit = os.environ.get("ELMO_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "elmo"


def is_offline() -> bool:
    """True when ``ELMO_OFFLINE`` forbids network access."""
    return os.environ.get("ELMO_OFFLINE", "").strip().lower() in _TRUE


def release_base_url() -> str:
    """The base URL in use: ``$ELMO_RELEASE_BASE_URL`` or :data:`DEFAULT_BASE_URL`."""
    return (os.environ.get("ELMO_RELEASE_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def _rebase(url: str, name: str) -> str:
    """`url` of the release `name`, on the mirror `$ELMO_RELEASE_BASE_URL` if one is set."""
    base = release_base_url()
    if base == DEFAULT_BASE_URL:
        return url
    if url.startswith(DEFAULT_BASE_URL + "/"):
        return base + url[len(DEFAULT_BASE_URL) :]
    return f"{base}/{name}/{url.rsplit('/', 1)[-1]}"


def _sidecar(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256")


def _part(dest: Path) -> Path:
    return dest.with_suffix(dest.suffix + ".part")


def _file_sha256(path: Path, hasher: hashlib._Hash | None = None) -> hashlib._Hash:
    """The sha256 of a file (or `hasher`, such as an md5, fed with it)."""
    h = hasher if hasher is not None else hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h


def _read_sidecar(path: Path) -> str:
    text = path.read_text(encoding="ascii", errors="replace").split()
    return text[0].lower() if text else ""


def _write_sidecar(dest: Path, digest: str) -> None:
    side = _sidecar(dest)
    tmp = side.with_name(side.name + ".tmp")
    tmp.write_text(digest + "\n", encoding="ascii")
    os.replace(tmp, side)


def _md5_matches(path: Path, md5: str | None) -> bool:
    return md5 is None or _file_sha256(path, hashlib.md5()).hexdigest() == md5.lower()


def _verify_cached(dest: Path, expected: str | None, md5: str | None = None) -> bool:
    """Check a cached ``dest``. True when it can be used as is, False when it must be
    downloaded again; raises DownloadError when its recorded checksum no longer matches."""
    side = _sidecar(dest)
    if side.exists():
        recorded = _read_sidecar(side)
        actual = _file_sha256(dest).hexdigest()
        if actual != recorded:
            raise DownloadError(
                f"cached file {dest} is corrupt (sha256 {actual}, expected {recorded} "
                f"from {side}); delete it to download again"
            )
        if expected is not None and actual != expected.lower():
            raise DownloadError(
                f"cached file {dest} has sha256 {actual} but {expected} was requested; "
                "delete it to download again"
            )
        return True
    # No sidecar: a file put there by hand (or by an interrupted earlier run).
    if expected is not None or md5 is not None:
        actual = _file_sha256(dest).hexdigest()
        if (expected is None or actual == expected.lower()) and _md5_matches(dest, md5):
            _write_sidecar(dest, actual)
            return True
        return False
    # Trust a hand-placed file only when we may not download it again anyway.
    return is_offline()


def _network_error(url: str, dest: Path, exc: BaseException) -> DownloadError:
    part = _part(dest)
    if isinstance(exc, urllib.error.HTTPError):
        what = f"the server answered HTTP {exc.code} {exc.reason}"
    elif isinstance(exc, urllib.error.URLError):
        what = f"the server could not be reached ({exc.reason})"
    elif isinstance(exc, TimeoutError):
        what = f"the connection timed out after {TIMEOUT:g} s"
    else:
        what = f"the connection failed ({type(exc).__name__}: {exc})"
    keep = (
        f" The data received so far is kept in {part}; run again to resume."
        if part.exists() and part.stat().st_size
        else ""
    )
    return DownloadError(
        f"could not download {url}: {what}.{keep} Check your network connection or proxy, "
        f"or download the file by hand and save it as {dest}."
    )


def _parse_content_range(value: str | None) -> tuple[int | None, int | None]:
    """``bytes START-END/TOTAL`` (or ``bytes */TOTAL``) -> (START, TOTAL); None if absent."""
    if not value:
        return None, None
    try:
        unit, _, spec = value.strip().partition(" ")
        if unit.lower() != "bytes":
            return None, None
        span, _, total = spec.partition("/")
        start = None if span.strip() == "*" else int(span.split("-")[0])
        return start, (None if total.strip() in ("", "*") else int(total))
    except ValueError:
        return None, None


def _int_header(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def download(url: str, dest: Path, *, progress: bool = True, sha256: str | None = None,
             md5: str | None = None) -> Path:
    """Download ``url`` to ``dest`` unless a verified copy is already there; return ``dest``.

    A leftover ``dest.part`` from an interrupted run is resumed with an HTTP Range request.
    The size is checked against the server's announcement and, when ``sha256`` or ``md5`` is
    given, the content against that hex digest. A ``<dest>.sha256`` sidecar is written beside
    the file and checked on later calls. Raises :class:`DownloadError` (or
    :class:`OfflineError` when ``ELMO_OFFLINE`` is set and the file is missing).
    """
    dest = Path(dest)
    if dest.is_file() and _verify_cached(dest, sha256, md5):
        return dest
    if is_offline():
        state = "does not match the expected sha256" if dest.is_file() else "is not in the cache"
        raise OfflineError(
            f"{dest} {state} and ELMO_OFFLINE is set, so it cannot be downloaded "
            f"from {url}. Download that URL on a machine with network access and copy the file "
            f"to {dest}, or unset ELMO_OFFLINE to allow downloading."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = _part(dest)

    hasher: hashlib._Hash | None = None
    total: int | None = None
    for _attempt in range(2):
        hasher, total, retry = _fetch(url, dest, part, progress)
        if not retry:
            break
    else:  # pragma: no cover - the server keeps refusing the range
        raise DownloadError(f"could not download {url}: the server refused to resume it")

    size = part.stat().st_size
    if total is not None and size != total:
        if size > total:
            part.unlink(missing_ok=True)
            keep = "The partial file was deleted."
        else:
            keep = f"The data received so far is kept in {part}; run again to resume."
        raise DownloadError(
            f"download of {url} is incomplete: the server announced {total} bytes but "
            f"{size} bytes were received. {keep}"
        )
    digest = hasher.hexdigest()
    for name, expected, actual in (
        ("sha256", sha256, lambda: digest),
        ("md5", md5, lambda: _file_sha256(part, hashlib.md5()).hexdigest()),
    ):
        if expected is not None and (got := actual()) != expected.lower():
            part.unlink(missing_ok=True)
            raise DownloadError(
                f"checksum mismatch for {url}: expected {name} {expected.lower()}, got {got}. "
                "The downloaded data was deleted; try again, or check the expected checksum."
            )
    os.replace(part, dest)
    _write_sidecar(dest, digest)
    return dest


def _fetch(
    url: str, dest: Path, part: Path, progress: bool
) -> tuple[hashlib._Hash, int | None, bool]:
    """One HTTP request appending to ``part``. Returns (hash of the whole part, announced
    full size or None, whether to retry from zero because the part was unusable)."""
    offset = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            # Range not satisfiable: the part is already complete, or it is unusable.
            _, total = _parse_content_range(exc.headers.get("Content-Range"))
            exc.close()
            if total == offset:
                return _file_sha256(part), total, False
            part.unlink(missing_ok=True)
            return hashlib.sha256(), None, True
        raise _network_error(url, dest, exc) from exc
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        raise _network_error(url, dest, exc) from exc

    with response:
        status = response.status
        length = _int_header(response.headers.get("Content-Length"))
        if status == 206 and offset:
            start, total = _parse_content_range(response.headers.get("Content-Range"))
            if start != offset:
                part.unlink(missing_ok=True)
                return hashlib.sha256(), None, True
            if total is None and length is not None:
                total = offset + length
            hasher = _file_sha256(part)
            mode = "ab"
        else:
            # 200 (server ignored or was not sent a Range): start from zero.
            offset, total, hasher, mode = 0, length, hashlib.sha256(), "wb"

        with (
            open(part, mode) as out,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=dest.name,
                file=sys.stderr,
                disable=not progress,
                leave=False,
            ) as bar,
        ):
            while True:
                try:
                    chunk = response.read1(_CHUNK)
                except (http.client.HTTPException, OSError) as exc:
                    out.flush()
                    raise _network_error(url, dest, exc) from exc
                if not chunk:
                    break
                out.write(chunk)
                hasher.update(chunk)
                bar.update(len(chunk))
    return hasher, total, False


def resolve_released(name: str, *, progress: bool = True) -> tuple[Path, Path]:
    """Local ``(options.json, weights.hdf5)`` paths of the released model ``name``,
    downloading them into ``cache_dir()/name/`` if needed."""
    model = RELEASED_MODELS.get(name)
    if model is None:
        known = ", ".join(sorted(RELEASED_MODELS))
        raise ValueError(f"unknown released ELMo model {name!r}; known models: {known}")
    folder = cache_dir() / model.name
    paths = []
    for official, md5 in ((model.options_url, model.options_md5),
                          (model.weights_url, model.weights_md5)):
        paths.append(download(_rebase(official, model.name),
                              folder / official.rsplit("/", 1)[-1], progress=progress, md5=md5))
    return paths[0], paths[1]


def _efml_url(release: EfmlRelease) -> str:
    base = os.environ.get("ELMO_RELEASE_BASE_URL")
    archive = release.url.rsplit("/", 1)[-1]
    return f"{base.rstrip('/')}/efml/{archive}" if base else release.url


def _unpack(archive: Path, into: Path) -> None:
    """Extract a .zip or .tar.* archive into `into`; no member may land outside it."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                target = (into / member).resolve()
                if not target.is_relative_to(into.resolve()):
                    raise DownloadError(f"{archive}: member {member!r} lies outside the archive")
            z.extractall(into)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as t:
            try:
                t.extractall(into, filter="data")
            except tarfile.FilterError as err:
                raise DownloadError(f"{archive}: unsafe member: {err}") from err
    else:
        raise DownloadError(f"{archive} is neither a zip nor a tar archive; delete it to "
                            "download it again")


def _model_root(tree: Path, archive: Path) -> Path:
    """The one directory in an unpacked tree that holds an EfML model (its encoder.pkl)."""
    found = sorted(p.parent for p in tree.rglob("encoder.pkl"))
    if len(found) != 1:
        raise DownloadError(f"{archive} should hold one ELMoForManyLangs model directory "
                            f"(with encoder.pkl); found {len(found)}")
    return found[0]


def resolve_efml(name: str, *, progress: bool = True) -> Path:
    """The local model directory of the ELMoForManyLangs release ``name`` (``efml:<lang>``),
    downloading its archive into ``cache_dir()/efml/`` and unpacking it on first use."""
    release = EFML_RELEASES.get(name)
    if release is None:
        known = ", ".join(sorted(EFML_RELEASES))
        raise ValueError(f"unknown ELMoForManyLangs model {name!r}; known models: {known}")
    folder = cache_dir() / "efml"
    model_dir = folder / release.name.removeprefix("efml:")
    if model_dir.is_dir():
        return model_dir
    archive = download(_efml_url(release), folder / release.url.rsplit("/", 1)[-1],
                       progress=progress)
    tmp = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}.", dir=folder))
    try:
        _unpack(archive, tmp)
        try:
            os.replace(_model_root(tmp, archive), model_dir)
        except OSError:
            if not model_dir.is_dir():  # not a concurrent run that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return model_dir
