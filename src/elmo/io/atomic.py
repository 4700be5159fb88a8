"""Safe file output: claim an output (checks and a lock), write it (a file, or a directory
whole) under a temporary name beside the target, rename it when complete."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from elmo.errors import ElmoError
from elmo.io.textfile import is_stdin


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it to `path`, on error delete it.

    A reader never sees a half-written `path`, and a failed or killed writer leaves no `path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp (or the writer) made 0600: the usual mode
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 text to `path` atomically."""
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextmanager
def claim_output(
    path: str | Path,
    *,
    inputs: Iterable[str | Path] = (),
    overwrite: bool = False,
    directory_of: Iterable[str] | None = None,
) -> Iterator[Path]:
    """Check that writing `path` loses nothing, and hold a lock on it while the body writes.

    Refused with an ElmoError that says the fix: `path` is one of `inputs`; it exists and
    `overwrite` is false; a file is expected and it is a directory, or the reverse; its
    directory cannot be written. Missing parent directories are created. Another process
    claiming the same `path` meanwhile is refused ("another process is writing ...").
    `directory_of`: the output is a directory, and these are the names written into it (only
    they count as existing output); created here, it is removed again if the body fails and
    leaves it empty.
    """
    path = Path(path)
    for source in inputs:
        if not is_stdin(source) and _same_path(Path(source), path):
            raise ElmoError(f"the output {path} is also an input: choose another output name")
    if directory_of is None and path.is_dir():
        raise ElmoError(f"the output {path} is a directory: give a file name, such as "
                        f"{path / 'out'}{path.suffix}")
    if directory_of is not None and path.exists() and not path.is_dir():
        raise ElmoError(f"the output {path} is a file: give a directory (new or existing)")
    _make_parent(path.parent)
    with output_lock(path):
        existing = [path] if directory_of is None else [path / n for n in directory_of]
        existing = [p for p in existing if p.exists()]
        if existing and not overwrite:
            names = ", ".join(map(str, existing))
            raise ElmoError(f"{names} already exist{'s' * (len(existing) == 1)}: pass "
                            "--overwrite (Python: overwrite=True) to replace, or choose "
                            "another output")
        created = directory_of is not None and not path.exists()
        if directory_of is not None:
            _make_parent(path)
        try:
            yield path
        except BaseException:
            if created and path.is_dir() and not any(path.iterdir()):
                path.rmdir()
            raise


def _same_path(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _make_parent(directory: Path) -> None:
    """Create `directory` (and its parents) if missing; refuse one that cannot be written."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ElmoError(f"cannot create the directory {directory}: a file has that name") from None
    except PermissionError:
        raise ElmoError(f"cannot create the directory {directory}: permission denied") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ElmoError(f"cannot write in {directory}: permission denied (choose an output "
                        "in a directory you can write)")


@contextmanager
def output_lock(path: str | Path, wait: bool = False) -> Iterator[None]:
    """An exclusive lock on `path` among our processes: the file PATH.lock, held with flock
    and removed on exit (a killed holder's lock is released by the kernel). Held by another
    process: ElmoError "another process is writing PATH", or with `wait`, wait for it. A
    link at PATH.lock is refused, not followed."""
    path = Path(path)
    lock_path = path.with_name(path.name + ".lock")
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as err:
            raise ElmoError(f"cannot write {path}: {err.strerror} (choose an output in a "
                            "directory you can write)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            raise ElmoError(f"another process is writing {path}: wait for it to finish, or "
                            "choose another output") from None
        try:  # the holder before us may have removed the file we locked: lock the new one
            if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        lock_path.unlink(missing_ok=True)
        os.close(fd)


@contextmanager
def atomic_directory(path: str | Path, keep_partial: str | None = None) -> Iterator[Path]:
    """Yield a new empty directory beside `path`; on success it replaces `path` (a directory,
    or nothing) whole, on error it is deleted.

    A reader sees the old directory or the new one, complete; only between two renames, none.
    A writer killed there leaves the old and new ones beside `path` (`.NAME.old`, `.NAME.new`);
    the next call deletes them. `keep_partial`, the name of the file in which the writer
    records its progress: a `.NAME.new` left by an earlier writer is yielded as it is (the
    caller resumes from what it holds, or empties it), and an error leaves it if it holds
    that file, for the next call to resume (without it, there is nothing to resume from).
    """
    path = Path(path)
    new, old = (path.with_name(f".{path.name}.{suffix}") for suffix in ("new", "old"))
    shutil.rmtree(old, ignore_errors=True)
    if keep_partial is None:
        shutil.rmtree(new, ignore_errors=True)
    new.mkdir(parents=True, exist_ok=True)
    done = False
    try:
        yield new
        if path.exists():
            os.replace(path, old)
        os.replace(new, path)
        done = True
    finally:
        if done or keep_partial is None or not (new / keep_partial).exists():
            shutil.rmtree(new, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
