"""A stand-in for the Hugging Face Hub on 127.0.0.1, serving the routes that huggingface_hub's
downloads and uploads use (as read in its source): repo info at a revision, the file tree,
`resolve` (HEAD and GET, with X-Repo-Commit and ETag; LFS files redirect to a second server,
the "CDN", with X-Linked-Etag and X-Linked-Size), repo and branch creation, YAML validation,
preupload, the LFS batch API with basic PUT uploads, and NDJSON commits.

Private repos answer 401 RepoNotFound without the token, gated repos 403 GatedRepo on files;
`broken` names LFS files ("REPO/PATH") whose body the CDN serves short (a download that fails
midway).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

TOKEN = "hf_standin_token"
LFS_SUFFIXES = (".safetensors", ".hdf5", ".h5", ".pkl", ".th", ".bin")


def git_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Repo:
    private: bool = False
    gated: bool = False
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit
    tags: dict[str, str] = field(default_factory=dict)
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit -> files

    def commit_of(self, revision: str) -> str | None:
        revision = unquote(revision)
        found = self.branches.get(revision) or self.tags.get(revision)
        return found or (revision if revision in self.commits else None)


class HubStandIn:
    """The Hub's state and its two servers (`url`: the API; blobs come from the CDN)."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.blobs: dict[str, bytes] = {}  # sha256 -> content, for LFS
        self.broken: set[str] = set()  # "repo_id/path" served short
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.lock = threading.Lock()
        self.api = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.cdn = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.api.server_port}"
        self.cdn_url = f"http://127.0.0.1:{self.cdn.server_port}"
        for server in (self.api, self.cdn):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        for server in (self.api, self.cdn):
            server.shutdown()
            server.server_close()

    def commit(self, repo_id: str, files: dict[str, bytes], *, branch: str = "main",
               replace: bool = False, **flags: bool) -> str:
        """Commit `files` to `branch` (created from main if new); returns the commit id."""
        with self.lock:
            repo = self.repos.setdefault(repo_id, Repo(**flags))
            if not repo.branches:  # a new repo holds .gitattributes, as on the Hub
                repo.branches["main"] = self._new_commit(repo, {".gitattributes": b"*.th lfs\n"})
            parent = repo.branches.get(branch, repo.branches["main"])
            tree = {} if replace else dict(repo.commits[parent])
            tree.update(files)
            for content in files.values():
                self.blobs[hashlib.sha256(content).hexdigest()] = content
            repo.branches[branch] = self._new_commit(repo, tree, parent)
            return repo.branches[branch]

    def commit_folder(self, repo_id: str, folder: Path, prefix: str = "", **kwargs) -> str:
        files = {f"{prefix}{p.relative_to(folder).as_posix()}": p.read_bytes()
                 for p in sorted(folder.rglob("*")) if p.is_file()}
        return self.commit(repo_id, files, **kwargs)

    def _new_commit(self, repo: Repo, tree: dict[str, bytes], parent: str = "") -> str:
        digest = hashlib.sha1(parent.encode())
        for path in sorted(tree):
            digest.update(path.encode() + git_oid(tree[path]).encode())
        commit = digest.hexdigest()
        repo.commits[commit] = tree
        return commit


def _handler(hub: HubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        # ---- plumbing ------------------------------------------------------------------
        def _send(self, status: int, body: bytes = b"", headers: dict | None = None,
                  length: int | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, data, status: int = 200, headers: dict | None = None) -> None:
            self._send(status, json.dumps(data).encode(),
                       {"Content-Type": "application/json", **(headers or {})})

        def _error(self, status: int, code: str, headers: dict | None = None) -> None:
            self._json({"error": code}, status, {"X-Error-Code": code, **(headers or {})})

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while (size := int(self.rfile.readline().strip(), 16)) > 0:
                    data += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
                return data
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _authorized(self) -> bool:
            return self.headers.get("Authorization") == f"Bearer {TOKEN}"

        def _repo(self, repo_id: str, *, files: bool = False) -> Repo | None:
            """The repo if this request may see it; else the Hub's error is sent."""
            repo = hub.repos.get(repo_id)
            if repo is None or (repo.private and not self._authorized()):
                self._error(401 if not self._authorized() else 404, "RepoNotFound")
                return None
            if files and repo.gated and not self._authorized():
                self._error(403, "GatedRepo")
                return None
            return repo

        def _dispatch(self, routes) -> None:
            hub.requests.append((self.command, self.path))
            self.body = self._body() if self.command in ("POST", "PUT") else b""
            path = urlsplit(self.path).path
            for pattern, method in routes:
                match = re.fullmatch(pattern, path)
                if match:
                    return method(*match.groups())
            self._error(404, "NotFound")

        # ---- routes --------------------------------------------------------------------
        def do_GET(self) -> None:
            self._dispatch([
                (r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", self.repo_info),
                (r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.+))?", self.tree),
                (r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.resolve),
                (r"/lfs/([0-9a-f]{64})", self.blob),
            ])

        do_HEAD = do_GET

        def do_POST(self) -> None:
            self._dispatch([
                (r"/api/repos/create", self.create_repo),
                (r"/api/validate-yaml", self.validate_yaml),
                (r"/api/models/([^/]+/[^/]+)/preupload/([^/]+)", self.preupload),
                (r"/([^/]+/[^/]+)\.git/info/lfs/objects/batch", self.lfs_batch),
                (r"/api/models/([^/]+/[^/]+)/commit/([^/]+)", self.commit),
                (r"/api/models/([^/]+/[^/]+)/branch/([^/]+)", self.create_branch),
            ])

        def do_PUT(self) -> None:
            self._dispatch([(r"/lfs/([0-9a-f]{64})", self.upload_blob)])

        def repo_info(self, repo_id: str, revision: str | None) -> None:
            if (repo := self._repo(repo_id)) is None:
                return
            if (commit := repo.commit_of(revision or "main")) is None:
                return self._error(404, "RevisionNotFound")
            self._json({"id": repo_id, "sha": commit, "private": repo.private,
                        "gated": "manual" if repo.gated else False,
                        "siblings": [{"rfilename": p} for p in sorted(repo.commits[commit])]})

        def tree(self, repo_id: str, revision: str, folder: str | None) -> None:
            if (repo := self._repo(repo_id)) is None:
                return
            if (commit := repo.commit_of(revision)) is None:
                return self._error(404, "RevisionNotFound")
            prefix = f"{unquote(folder)}/" if folder else ""
            recursive = parse_qs(urlsplit(self.path).query).get("recursive") == ["true"]
            entries = []
            for path, content in sorted(repo.commits[commit].items()):
                if not path.startswith(prefix) or \
                        (not recursive and "/" in path.removeprefix(prefix)):
                    continue
                entry = {"type": "file", "oid": git_oid(content), "size": len(content),
                         "path": path}
                if path.endswith(LFS_SUFFIXES):
                    entry["lfs"] = {"oid": hashlib.sha256(content).hexdigest(),
                                    "size": len(content), "pointerSize": 134}
                entries.append(entry)
            self._json(entries)

        def resolve(self, repo_id: str, revision: str, path: str) -> None:
            if (repo := self._repo(repo_id, files=True)) is None:
                return
            if (commit := repo.commit_of(revision)) is None:
                return self._error(404, "RevisionNotFound")
            path = unquote(path)
            if path not in repo.commits[commit]:
                return self._error(404, "EntryNotFound", {"X-Repo-Commit": commit})
            content = repo.commits[commit][path]
            if path.endswith(LFS_SUFFIXES):  # to the CDN, as the Hub does
                sha256 = hashlib.sha256(content).hexdigest()
                broken = int(f"{repo_id}/{path}" in hub.broken)
                return self._send(302, headers={
                    "Location": f"{hub.cdn_url}/lfs/{sha256}?broken={broken}",
                    "X-Repo-Commit": commit, "X-Linked-Etag": f'"{sha256}"',
                    "X-Linked-Size": str(len(content))})
            self._send(200, content, {"X-Repo-Commit": commit, "ETag": f'"{git_oid(content)}"'})

        def blob(self, sha256: str) -> None:
            content = hub.blobs.get(sha256)
            if content is None:
                return self._error(404, "EntryNotFound")
            if parse_qs(urlsplit(self.path).query).get("broken") == ["1"]:
                content = content[: len(content) // 2]
            self._send(200, content, {"ETag": f'"{sha256}"'})

        def create_repo(self) -> None:
            if not self._authorized():
                return self._error(401, "Unauthorized")
            payload = json.loads(self.body)
            repo_id = f"{payload['organization']}/{payload['name']}"
            if repo_id in hub.repos:  # the Hub names the repo's URL here too
                return self._json({"error": "You already created this model repo",
                                   "url": f"{hub.url}/{repo_id}"}, 409)
            private = payload.get("visibility") == "private" or payload.get("private") is True
            hub.commit(repo_id, {}, private=private)
            self._json({"url": f"{hub.url}/{repo_id}", "name": repo_id})

        def validate_yaml(self) -> None:
            content = json.loads(self.body)["content"]
            front = content.split("---\n")[1] if content.startswith("---\n") else ""
            try:
                metadata = yaml.safe_load(front)
            except yaml.YAMLError as err:
                return self._json({"errors": [{"message": str(err)}]}, 400)
            if not isinstance(metadata, dict):
                return self._json({"errors": [{"message": "no YAML metadata"}]}, 400)
            self._json({"errors": [], "warnings": []})

        def preupload(self, repo_id: str, revision: str) -> None:
            if not self._authorized() or self._repo(repo_id) is None:
                return self._error(401, "RepoNotFound") if not self._authorized() else None
            files = json.loads(self.body)["files"]
            self._json({"files": [
                {"path": f["path"], "shouldIgnore": False, "oid": None,
                 "uploadMode": "lfs" if f["path"].endswith(LFS_SUFFIXES) else "regular"}
                for f in files]})

        def lfs_batch(self, repo_id: str) -> None:
            if not self._authorized():
                return self._error(401, "Unauthorized")
            objects = json.loads(self.body)["objects"]
            self._json({"transfer": "basic", "objects": [
                {"oid": o["oid"], "size": o["size"], "authenticated": True,
                 **({} if o["oid"] in hub.blobs else
                    {"actions": {"upload": {"href": f"{hub.cdn_url}/lfs/{o['oid']}"}}})}
                for o in objects]})

        def upload_blob(self, sha256: str) -> None:
            content = self.body
            if hashlib.sha256(content).hexdigest() != sha256:
                return self._error(400, "BadChecksum")
            hub.blobs[sha256] = content
            self._send(200)

        def commit(self, repo_id: str, revision: str) -> None:
            if not self._authorized():
                return self._error(401, "Unauthorized")
            if (repo := self._repo(repo_id)) is None:
                return
            branch = unquote(revision)
            if branch not in repo.branches:
                return self._error(404, "RevisionNotFound")
            files = {}
            for line in self.body.splitlines():
                item = json.loads(line)
                value = item["value"]
                if item["key"] == "file":
                    files[value["path"]] = base64.b64decode(value["content"])
                elif item["key"] == "lfsFile":
                    files[value["path"]] = hub.blobs[value["oid"]]
            commit = hub.commit(repo_id, files, branch=branch)
            self._json({"commitUrl": f"{hub.url}/{repo_id}/commit/{commit}",
                        "commitOid": commit, "pullRequestUrl": None})

        def create_branch(self, repo_id: str, branch: str) -> None:
            if not self._authorized():
                return self._error(401, "Unauthorized")
            if (repo := self._repo(repo_id)) is None:
                return
            if unquote(branch) in repo.branches:
                return self._json({"error": "Reference already exists"}, 409)
            repo.branches[unquote(branch)] = repo.branches["main"]
            self._json({})

    return Handler
