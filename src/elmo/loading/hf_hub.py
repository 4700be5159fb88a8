"""Models on the Hugging Face Hub: `hf:OWNER/REPO[/SUB/DIR][@REVISION]`.

`listing` asks the Hub (through `huggingface_hub`, the `[hub]` extra) which commit a revision
points to and which files the repo holds there, downloading nothing; `download` then fetches
the files a model's layout reads (`elmo.loading.resolve` decides which) into huggingface_hub's
own cache, where later runs find them, also offline. Its environment applies as in every
program that uses it: `HF_ENDPOINT`, `HF_HOME` / `HF_HUB_CACHE` (the cache: `$HF_HOME/hub`
unless `HF_HUB_CACHE` is set), `HF_HUB_OFFLINE` (the cache only: a branch or tag resolves to the
commit it named when the model was downloaded) and `HF_TOKEN` (private and gated repos).

The Hub's failures become `HubError`s that name the repo, the revision and the fix.
"""

from __future__ import annotations

import importlib
import logging
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from elmo.errors import ElmoError
from elmo.extras import import_extra

PREFIX = "hf:"
LIBRARY_NAME = "elmo"  # the Hub's `library_name`, and the user agent's


class HubError(ElmoError):
    """A Hub model that cannot be resolved, downloaded or published (names repo and fix)."""


@dataclass(frozen=True)
class HubName:
    """`hf:OWNER/REPO[/SUB/DIR][@REVISION]`, parsed: the model lives in `subfolder` ("" at the
    root) of `repo_id` at `revision` (None: the default branch)."""

    repo_id: str
    subfolder: str = ""
    revision: str | None = None

    def __str__(self) -> str:
        folder = f"/{self.subfolder}" if self.subfolder else ""
        return f"{PREFIX}{self.repo_id}{folder}" + (f"@{self.revision}" if self.revision else "")

    def path(self, name: str) -> str:
        """The repo path of the model's file `name`."""
        return f"{self.subfolder}/{name}" if self.subfolder else name

    def relative(self, path: str) -> str:
        """A repo path relative to the model's folder."""
        return path.removeprefix(f"{self.subfolder}/") if self.subfolder else path

    @property
    def where(self) -> str:
        """The repo and revision, for messages."""
        return f"{self.repo_id} at revision {self.revision!r}" if self.revision \
            else self.repo_id


def parse_hub_name(name: str) -> HubName:
    """`hf:OWNER/REPO[/SUB/DIR][@REVISION]` -> HubName; HubError for anything else."""
    folder, _, revision = name.removeprefix(PREFIX).partition("@")
    parts = folder.split("/")
    if not name.startswith(PREFIX) or len(parts) < 2 or not all(parts) \
            or (revision == "" and "@" in name):
        raise HubError(f"{name!r} names no Hub model: write hf:OWNER/REPO or "
                       "hf:OWNER/REPO/SUB/DIR, with @REVISION (a branch, tag or commit) to pin it")
    return HubName("/".join(parts[:2]), "/".join(parts[2:]), revision or None)


def _hub() -> ModuleType:
    """huggingface_hub, with the sub-modules used here imported (it loads them lazily)."""
    hub = import_extra("huggingface_hub", "a Hub model (hf:OWNER/REPO)")
    for module in ("constants", "errors", "file_download", "hf_api", "utils"):
        importlib.import_module(f"huggingface_hub.{module}")
    return hub


def listing(name: HubName) -> tuple[str, dict[str, int]]:
    """The commit `name`'s revision points to, and the files of its folder at that commit
    ({path relative to the folder: size in bytes}). Nothing is downloaded; a listing already
    in the cache is read from there (a commit's files never change), so offline works once
    the model was downloaded. Where the Hub cannot be reached (offline, or an error of the
    network), a branch or tag resolves to the commit it named when last seen."""
    hub = _hub()
    api = hub.HfApi(library_name=LIBRARY_NAME)
    offline = hub.constants.is_offline_mode()
    with hub_errors(name):
        commit, reached = _resolve(hub, api, name, offline)
        try:
            files = {f.path: f.size for f in hub.get_cached_repo_tree(name.repo_id,
                                                                      revision=commit)}
        except hub.errors.CachedRepoTreeNotFoundError:
            if not reached:  # no request: it would retry for half a minute, then fail
                files = _snapshot_files(hub, name, commit)
                if not files:
                    raise _uncached(hub, name, "") from None
            else:
                files = {f.path: f.size for f in api.list_repo_tree(
                    name.repo_id, revision=commit, recursive=True)
                    if isinstance(f, hub.hf_api.RepoFile)}
    if not reached and not offline:
        warnings.warn(f"could not reach the Hub ({hub.constants.ENDPOINT}): {name} is the "
                      f"commit {commit[:12]} it named when last seen", stacklevel=2)
    inside = {name.relative(p): size for p, size in files.items()
              if not name.subfolder or p.startswith(name.subfolder + "/")}
    if not inside:
        raise HubError(f"{name.repo_id} has no folder {name.subfolder!r} at commit "
                       f"{commit[:12]}" if name.subfolder else f"{name.repo_id} holds no files")
    return commit, inside


def _resolve(hub: ModuleType, api: Any, name: HubName, offline: bool) -> tuple[str, bool]:
    """The commit `name`'s revision points to, and whether the Hub said so (else the cache
    did). Offline, the cache is asked alone; huggingface_hub's warning that it could not reach
    the Hub and used the cached commit is withheld (`listing` says it in its own words)."""
    if offline:
        return api.resolve_revision(name.repo_id, revision=name.revision,
                                    local_files_only=True).resolved, False
    fallback = _CacheFallback()
    logger = logging.getLogger(hub.hf_api.__name__)
    logger.addFilter(fallback)
    try:
        commit = api.resolve_revision(name.repo_id, revision=name.revision).resolved
    finally:
        logger.removeFilter(fallback)
    return commit, not fallback.seen


class _CacheFallback(logging.Filter):
    """Withholds (and notes) huggingface_hub's warning that it resolved a revision from the
    cache because the Hub could not be reached (offline, refused, timed out, answered 5xx)."""

    seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Could not reach the Hub"):
            self.seen = True
            return False
        return True


def _snapshot_files(hub: ModuleType, name: HubName, commit: str) -> dict[str, int]:
    """The files of `commit` in the cache's snapshot folder: what offline use can list where
    the cache holds no listing of the commit (one written by an older huggingface_hub)."""
    folder = Path(hub.constants.HF_HUB_CACHE, hub.file_download.repo_folder_name(
        repo_id=name.repo_id, repo_type="model"), "snapshots", commit)
    return {p.relative_to(folder).as_posix(): p.stat().st_size
            for p in folder.rglob("*") if p.is_file()}


def download(name: HubName, commit: str, paths: Sequence[str], *, progress: bool = True) -> Path:
    """The local folder of `name` at `commit` holding the repo files `paths`: downloaded into
    huggingface_hub's cache unless they are there. A download that fails leaves no file that
    a later run reads (huggingface_hub moves each file into place once complete)."""
    hub = _hub()
    quiet = {} if progress else {"tqdm_class": _quiet_tqdm(hub)}
    with hub_errors(name):
        snapshot = Path(hub.snapshot_download(
            name.repo_id, revision=commit, allow_patterns=[_literal(p) for p in paths],
            library_name=LIBRARY_NAME, **quiet))
    missing = [p for p in paths if not (snapshot / p).is_file()]
    if missing:
        raise HubError(f"{name}: {', '.join(missing)} did not arrive in {snapshot}; run again")
    return snapshot / name.subfolder


def is_cached(name: HubName, commit: str, paths: Sequence[str]) -> bool:
    """Whether every repo file of `paths` at `commit` is in the cache (no network)."""
    hub = _hub()
    return all(isinstance(hub.try_to_load_from_cache(name.repo_id, p, revision=commit), str)
               for p in paths)


def _literal(path: str) -> str:
    """`path` as an fnmatch pattern that matches it alone."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def _quiet_tqdm(hub: ModuleType) -> type:
    class Quiet(hub.utils.tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Quiet


@contextmanager
def hub_errors(name: HubName) -> Iterator[None]:
    """Turn huggingface_hub's exceptions into HubErrors that say what to do."""
    hub = _hub()
    errors, constants = hub.errors, hub.constants
    token = "HF_TOKEN is set, but its account cannot read it" if hub.get_token() \
        else "no token was given: set HF_TOKEN (or run `hf auth login`)"
    # HfHubHTTPError derives from its HTTP client's base error (httpx2.HTTPError, say), which
    # the client raises for a connection refused or a timeout too
    transport = tuple(c for c in errors.HfHubHTTPError.__bases__ if c is not OSError)
    try:
        yield
    except errors.GatedRepoError:
        raise HubError(f"{name.repo_id} is a gated repo: accept its conditions on "
                       f"{constants.ENDPOINT}/{name.repo_id} and set HF_TOKEN to a token of "
                       f"that account ({token})") from None
    except errors.RevisionNotFoundError:
        raise HubError(f"{name.repo_id} has no revision {name.revision!r} (a branch, tag or "
                       "commit)") from None
    except errors.RepositoryNotFoundError:
        raise HubError(f"no model repo {name.repo_id} on the Hub ({constants.ENDPOINT}), or it "
                       f"is private and {token}") from None
    except (errors.LocalEntryNotFoundError, errors.RevisionResolutionError,
            errors.OfflineModeIsEnabled, errors.CachedRepoTreeNotFoundError) as err:
        raise _uncached(hub, name, f": {first_line(err)}") from None
    except errors.HfHubHTTPError as err:
        status = getattr(err.response, "status_code", None)
        why = f"; {token}" if status in (401, 403) else ""
        raise HubError(f"the Hub ({constants.ENDPOINT}) refused {name.where}: "
                       f"{first_line(err)}{why}") from None
    except transport as err:  # refused, timed out, ...
        raise _uncached(hub, name, f": {first_line(err)}") from None
    except OSError as err:  # a transfer cut short: huggingface_hub keeps no part of it
        raise HubError(f"the transfer of {name} failed ({first_line(err)}); nothing of it is "
                       "used: run the command again") from None


def _uncached(hub: ModuleType, name: HubName, detail: str) -> HubError:
    """The error for a model whose files the cache does not hold while the Hub is out of
    reach: offline, or unreachable (`detail`: what the network said)."""
    constants = hub.constants
    if constants.is_offline_mode():
        return HubError(f"{name} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) "
                        "and HF_HUB_OFFLINE is set: run once with the network (unset "
                        "HF_HUB_OFFLINE) to download it")
    return HubError(f"could not reach the Hub ({constants.ENDPOINT}) for {name.where}, and the "
                    f"cache does not hold it{detail}")


def first_line(err: Exception) -> str:
    """The first line of an error's message (its type's name when it has none)."""
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
