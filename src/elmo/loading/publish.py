"""Writing a model out: `save_model` writes a directory in our format or the official pair,
with the vocabulary and the record (`card.json`: tokenizer, training data, perplexity) that
came with the model (what `elmo export OUTDIR` writes); `push_to_hub` publishes a model to a
Hugging Face Hub repo in our format, with a model card (`README.md` with the Hub's metadata).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from elmo.errors import ElmoError, ModelFileError
from elmo.extras import import_extra
from elmo.io.atomic import atomic_output, atomic_write_text
from elmo.loading import hf_hub
from elmo.loading.formats.native import CARD_NAME, RUN_NAME, VOCAB_NAME
from elmo.loading.formats.registry import NATIVE, export_formats
from elmo.loading.formats.untrusted import (
    MAX_CONFIG_BYTES,
    MAX_VOCABULARY_BYTES,
    own_file,
    read_json,
    read_text,
)
from elmo.loading.load import LoadedModel, load_model
from elmo.loading.model_files import ModelFiles
from elmo.tokenize import TOKENIZERS

HUB_FORMAT = NATIVE.name  # what a Hub repo gets: `hf:OWNER/REPO` loads it fastest
PROSE_CARD = "MODEL_CARD.md"  # a shipped model's card, in Markdown
README = "README.md"
TAGS = ["elmo", "bilm", "contextual-embeddings", "feature-extraction"]
EXAMPLES = {"en": "We sat on the river bank .", "zh": "我们坐在河岸上。"}  # the card's example


def export_names(files: ModelFiles, fmt: str) -> tuple[str, ...]:
    """The names `save_model` writes for the model `files` (on this machine) in `fmt`."""
    return export_formats()[fmt].saved_files \
        + ((VOCAB_NAME,) if files.vocab_file is not None else ()) \
        + ((CARD_NAME,) if model_record(files, "") else ())


def save_model(loaded: LoadedModel, out_dir: str | Path, fmt: str = NATIVE.name, *,
               exported_from: str) -> list[Path]:
    """Write `loaded` into `out_dir` in the format named `fmt` (one of `export_formats()`), each
    file atomically, with its vocabulary and its record (`model_record`); returns the files
    written. The softmax is not written (the official prediction files have none)."""
    out_dir = Path(out_dir)
    export_format = export_formats()[fmt]
    vocab = loaded.files.vocab_file  # read and checked first: what is copied is what was read
    words = read_text(vocab, MAX_VOCABULARY_BYTES, "a vocabulary") if vocab else None
    record = model_record(loaded.files, exported_from)
    export_format.save(loaded.bilm, out_dir)
    written = [out_dir / name for name in export_format.saved_files]
    if words is not None:
        with atomic_output(out_dir / VOCAB_NAME) as tmp:
            tmp.write_bytes(words.encode("utf-8"))  # byte for byte
        written.append(out_dir / VOCAB_NAME)
    if record:  # `elmo embed OUTDIR` splits lines as the model did
        atomic_write_text(out_dir / CARD_NAME, json.dumps(record, indent=2) + "\n")
        written.append(out_dir / CARD_NAME)
    return written


def model_record(files: ModelFiles, exported_from: str) -> dict[str, Any]:
    """What a model records about itself, for its exported `card.json`: a shipped or exported
    model's card (data, training, perplexity), the tokenizer and, for an `elmo train` run, the
    training files; with `exported_from`. Empty when the model records nothing."""
    directory = files.directory
    card = _read_json(own_file(directory, CARD_NAME)) if directory is not None else {}
    run = _read_json(own_file(directory, RUN_NAME)) if directory is not None else {}
    train = run.get("config", {}).get("train") if isinstance(run.get("config"), dict) else None
    if isinstance(train, list) and "data_name" not in card:
        card["data_files"] = [Path(str(p)).name for p in train]
    tokenizer = files.recorded_tokenizer()
    if tokenizer is not None:
        card["tokenizer"] = tokenizer
    return {**card, "exported_from": exported_from} if card else {}


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object of a model's record `path`; {} when it is missing, larger than a
    config may be (left unread) or no JSON object."""
    try:
        data = read_json(path)
    except (OSError, ModelFileError):
        return {}
    return data if isinstance(data, dict) else {}


def push_to_hub(
    model: str | Path | ModelFiles | LoadedModel | None,
    repo_id: str,
    *,
    revision: str | None = None,
    private: bool | None = None,
    token: str | None = None,
    language: str | list[str] | None = None,
    license: str | None = None,
    commit_message: str | None = None,
    progress: bool = True,
) -> str:
    """Publish `model` (any MODEL `load_model` takes, or what it returned) to the Hub repo
    `repo_id` ("OWNER/REPO", or "OWNER/REPO/SUB/DIR" for a folder of it), created if missing
    (`private` then), on branch `revision` (created from the default branch if missing).

    The repo gets our format (`model.safetensors`, `config.json`), `vocab.txt` when the model
    has one, `card.json` (its tokenizer and what it records) and `README.md`, a model card
    with the Hub's metadata (`library_name: elmo`, `language` and `license` as given or
    recorded, tags, perplexity as recorded). An ELMoForManyLangs model is converted: no
    pickle is uploaded. `token`: else HF_TOKEN or the saved login. Returns the commit's URL;
    `hf:REPO_ID@REVISION` loads the model back."""
    name = hf_hub.parse_hub_name(hf_hub.PREFIX + repo_id)
    if name.revision is not None:
        raise ElmoError(f"{repo_id!r}: give the branch as revision=, not after '@'")
    hub = import_extra("huggingface_hub", "publishing to the Hub")
    loaded = model if isinstance(model, LoadedModel) else load_model(model, progress=progress)
    exported_from = loaded.files.name
    api = hub.HfApi(token=token, library_name=hf_hub.LIBRARY_NAME)
    with tempfile.TemporaryDirectory(prefix="elmo-push-") as tmp:
        with _step(name, "writing the model and its card"):
            save_model(loaded, tmp, HUB_FORMAT, exported_from=exported_from)
            card = model_card(loaded, name, revision=revision, language=language,
                              license=license)
            (Path(tmp) / README).write_text(card, encoding="utf-8")
        with _step(name, f"creating the repo {name.repo_id}"):
            api.create_repo(name.repo_id, private=private, exist_ok=True)
        if revision is not None:
            with _step(name, f"creating the branch {revision!r} of {name.repo_id}"):
                api.create_branch(name.repo_id, branch=revision, exist_ok=True)
        with _step(name, f"uploading to {name.repo_id}"):
            commit = api.upload_folder(
                repo_id=name.repo_id, folder_path=tmp, path_in_repo=name.subfolder or None,
                revision=revision, commit_message=commit_message or f"Upload {exported_from}")
    return commit.commit_url


@contextmanager
def _step(name: hf_hub.HubName, what: str) -> Iterator[None]:
    """One step of publishing: the Hub's errors as `hub_errors` words them; any other error of
    a library (an answer it did not expect, say) a HubError naming the step."""
    try:
        with hf_hub.hub_errors(name):
            yield
    except ElmoError:
        raise
    except Exception as err:
        raise hf_hub.HubError(f"publishing to {name}: {what} failed ({type(err).__name__}: "
                              f"{hf_hub.first_line(err)})") from err


def model_card(loaded: LoadedModel, name: hf_hub.HubName, *, revision: str | None = None,
               language: str | list[str] | None = None, license: str | None = None) -> str:
    """`README.md` for the Hub: its YAML metadata, how to load the model (from branch
    `revision` when given), what it is (a shipped model's own card, else a table of its facts)
    and the perplexity it records."""
    hub = import_extra("huggingface_hub", "publishing to the Hub")
    record = model_record(loaded.files, loaded.files.name)
    perplexity = {text: p for text, p in record.get("perplexity", {}).items()
                  if isinstance(p, dict) and "average" in p}
    results = [hub.EvalResult(
        task_type="text-generation", task_name="Language modelling (forward and backward)",
        dataset_type=text, dataset_name=text, metric_type="perplexity",
        metric_name="perplexity (mean of both directions)", metric_value=round(p["average"], 2))
        for text, p in perplexity.items()]
    language = language or record.get("language")
    metadata = hub.ModelCardData(
        library_name=hf_hub.LIBRARY_NAME, language=language,
        license=license or record.get("license"), tags=TAGS, pipeline_tag="feature-extraction",
        model_name=name.repo_id.split("/")[-1], eval_results=results or None)
    usage = _usage(str(hf_hub.HubName(name.repo_id, name.subfolder, revision)),
                   record.get("tokenizer"), _example_language(loaded, language))
    prose = own_file(loaded.files.directory, PROSE_CARD) if loaded.files.directory else None
    if prose is not None and prose.is_file():
        body = f"{usage}\n{read_text(prose, MAX_CONFIG_BYTES, 'a model card')}"
    else:
        body = f"# {name.repo_id.split('/')[-1]}\n\nAn ELMo biLM.\n\n{usage}\n" \
            + _facts(loaded, record) + _perplexity_table(perplexity)
    return f"---\n{metadata.to_yaml()}\n---\n\n{body}"


def _usage(model: str, tokenizer: str | None, language: str) -> str:
    """How to load `model` (a Hub name): the command, and Python that splits an example
    sentence in `language` with the model's recorded `tokenizer` (None: whitespace)."""
    kind = TOKENIZERS.get(tokenizer or "")
    extras = ",".join(["hub", *([kind.extra] if kind and kind.extra else [])])
    split = f"the `{tokenizer}` tokenizer, as in training" if tokenizer \
        else "whitespace (the model records no tokenizer)"
    return (f"Load it with the `elmo` package (`pip install 'elmo-bilm[{extras}]'`); text is "
            f"split with {split}:\n\n"
            f"```\nelmo embed {model} input.txt vectors.hdf5\n```\n\n"
            f"```python\nfrom elmo import Embedder, get_tokenizer\n\n"
            f"embedder = Embedder.from_pretrained(\"{model}\")\n"
            f"tokens = get_tokenizer(\"{tokenizer or 'whitespace'}\")(\"{EXAMPLES[language]}\")\n"
            f"layers = embedder.embed_sentence(tokens)  # (L+1, len(tokens), 2P)\n```\n")


def _example_language(loaded: LoadedModel, language: str | list[str] | None) -> str:
    """The language of the card's example (a key of EXAMPLES): the card's first language if
    there is an example in it; else Chinese for a model whose vocabulary is mostly Han
    characters, else English."""
    first = language if isinstance(language, str) or language is None else language[0]
    if first in EXAMPLES:
        return first
    vocab = loaded.files.vocab_file
    c = loaded.bilm.config
    words = read_text(vocab, MAX_VOCABULARY_BYTES, "a vocabulary").split() \
        if vocab is not None \
        else c.word_vocab or c.char_vocab
    han = sum(any("\u4e00" <= ch <= "\u9fff" for ch in w) for w in words)
    return "zh" if han > len(words) / 2 else "en"


def _facts(loaded: LoadedModel, record: dict[str, Any]) -> str:
    c = loaded.bilm.config
    widths = [w for w, _ in c.filters]
    chars = c.encoder.phrase(c)
    data = record.get("data_name") or ", ".join(record.get("data_files", [])) or "not recorded"
    rows = [
        ("architecture", f"char-CNN over {chars}: {c.n_filters} filters (widths "
         f"{min(widths)}-{max(widths)}), {c.n_highway} highway; {c.n_layers} LSTM layers x 2 "
         f"directions, cell {c.lstm_dim}, projection {c.projection_dim}"),
        ("output", f"{loaded.bilm.num_layers} layers of {c.output_dim} values per token"),
        ("parameters", f"{sum(p.numel() for p in loaded.bilm.parameters()):,}"),
        ("tokenizer", record.get("tokenizer") or "not recorded (whitespace)"),
        ("training data", data),
        ("exported from", f"`{loaded.files.name}`"),
    ]
    return "| | |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)


def _perplexity_table(perplexity: dict[str, dict[str, Any]]) -> str:
    if not perplexity:
        return ""
    rows = "".join(f"| {text} | {p.get('forward', float('nan')):.1f} | "
                   f"{p.get('backward', float('nan')):.1f} | {p['average']:.1f} | "
                   f"{p.get('tokens', '')} |\n" for text, p in perplexity.items())
    return ("\n## Perplexity\n\nAs the model records it (`card.json`):\n\n"
            "| text | forward | backward | average | tokens |\n|---|---|---|---|---|\n" + rows)
