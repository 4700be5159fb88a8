"""Released ELMo models by name, downloaded on first use into a local cache.

Files are fetched by `elmo.loading.download` (resumed, checked, offline with
``ELMO_OFFLINE``) into ``cache_dir()/<name>/`` (``ELMO_CACHE``). Environment variable:

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

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elmo.loading.download import (
    DownloadError,
    OfflineError,
    cache_dir,
    download,
    is_offline,
    unpack,
)

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
        unpack(archive, tmp)
        try:
            os.replace(_model_root(tmp, archive), model_dir)
        except OSError:
            if not model_dir.is_dir():  # not a concurrent run that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return model_dir
