"""Files downloaded on first use into a local cache, with the standard library (``urllib``).

Interrupted downloads are resumed with HTTP ``Range`` requests, sizes are checked against
what the server announced, and a ``<file>.sha256`` sidecar is written next to every
completed file so that later corruption of the cache is detected; where an MD5 of a file is
known, the download is checked against it too before it is used. Archives are unpacked with
no member outside their directory.

Environment variables:

``ELMO_CACHE``
    Cache directory (default ``$XDG_CACHE_HOME/elmo`` or ``~/.cache/elmo``).
``ELMO_OFFLINE``
    When set to ``1`` (or ``true``/``yes``/``on``), never touch the network; only files
    already in the cache are used.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from tqdm import tqdm

from elmo.errors import ElmoError

TIMEOUT = 60.0
"""Seconds to wait for the server to connect or to send more data."""

_CHUNK = 1 << 16
_USER_AGENT = "elmo-bilm (+python urllib)"
_TRUE = {"1", "true", "yes", "on"}


class DownloadError(ElmoError):
    """A file could not be downloaded (network failure, bad size or checksum, ...)."""


class OfflineError(DownloadError):
    """A file is not cached and ``ELMO_OFFLINE`` forbids downloading it."""


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


def unpack(archive: Path, into: Path) -> None:
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
