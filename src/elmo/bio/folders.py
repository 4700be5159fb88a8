"""The prefix and its stage directories as the pipeline writes them: opened once, links not
followed, and written through those handles.

`PrefixFolder(prefix)` opens PREFIX (which may itself be a link: the user's choice) and
`stage(name)` makes and opens a stage's directory relative to it (`mkdir` and `open` with
`dir_fd`, `O_NOFOLLOW`), refusing a link or a file put at that name after the checks. Each
returns the path to write through: `/proc/self/fd/N`, the directory that was opened, however
its name is changed meanwhile, so that every writer (ours, h5py's, plotly's, which write by
path) writes there. Where the system has no `/proc/self/fd`, the directory's own path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import TracebackType

from elmo.errors import ElmoError

_FDS = Path("/proc/self/fd")


class PrefixFolder:
    """PREFIX opened for a run (a context manager: the handles are closed on exit).
    `place`: the path to write PREFIX's own files through."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.fds: list[int] = []
        self.place = self._opened(prefix, lambda: os.open(prefix, os.O_RDONLY | os.O_DIRECTORY))

    def stage(self, name: str) -> Path:
        """Stage `name`'s directory, made if missing: the path to write it through."""
        try:
            os.mkdir(name, dir_fd=self.fds[0])
        except FileExistsError:
            pass  # checked when opened
        return self._opened(self.prefix / name, lambda: os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.fds[0]))

    def remove(self, name: str) -> None:
        """Remove stage `name`'s directory (a link there is refused, not followed)."""
        try:
            shutil.rmtree(self.place / name)
        except OSError as err:
            raise ElmoError(f"cannot remove {self.prefix / name}: {err.strerror or err} (it "
                            "changed while the run was checking it): look at it, and run "
                            "again") from None

    def _opened(self, path: Path, opener) -> Path:
        try:
            fd = opener()
        except OSError as err:
            raise ElmoError(f"{path} is not a directory the pipeline can write "
                            f"({err.strerror}; a link or a file was put there after the "
                            "checks?): remove it, or choose another prefix") from None
        self.fds.append(fd)
        through = _FDS / str(fd)
        try:
            same = os.path.samestat(os.stat(through), os.fstat(fd))
        except OSError:
            same = False
        return through if same else path

    def __enter__(self) -> PrefixFolder:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
