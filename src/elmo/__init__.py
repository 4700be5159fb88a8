"""elmo: deep contextualized word representations (Peters et al. 2018) in PyTorch.

The public names are imported from their modules on first use (`elmo.Embedder`, `from elmo
import Embedder`), so that `import elmo` itself loads no torch: the `elmo` command
(`elmo.__main__`) answers Ctrl-C even while torch is being imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
PUBLIC_NAMES = {
    "Elmo": "elmo.integrations.allennlp",
    "ElmoEmbedder": "elmo.integrations.allennlp",
    "batch_to_ids": "elmo.chars",
    "BiLMConfig": "elmo.config",
    "EmbedSettings": "elmo.embedding",
    "Embedder": "elmo.embedding",
    "ElmoError": "elmo.errors",
    "LoadedModel": "elmo.loading",
    "load_model": "elmo.loading",
    "load_pretrained": "elmo.loading",
    "load_bilm_tf": "elmo.loading.formats",
    "save_bilm_tf": "elmo.loading.formats",
    "save_pretrained": "elmo.loading.formats",
    "push_to_hub": "elmo.loading.publish",
    "BiLM": "elmo.modules",
    "BiLMOutput": "elmo.modules",
    "CharCNNEncoder": "elmo.modules",
    "ScalarMix": "elmo.modules",
    "TOKENIZER_NAMES": "elmo.tokenize",
    "Tokenizer": "elmo.tokenize",
    "get_tokenizer": "elmo.tokenize",
}

__all__ = sorted(PUBLIC_NAMES)


def __getattr__(name: str) -> Any:
    if name not in PUBLIC_NAMES:
        raise AttributeError(f"module 'elmo' has no attribute {name!r}")
    value = getattr(importlib.import_module(PUBLIC_NAMES[name]), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC_NAMES})


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from elmo.chars import batch_to_ids
    from elmo.config import BiLMConfig
    from elmo.embedding import Embedder, EmbedSettings
    from elmo.errors import ElmoError
    from elmo.integrations.allennlp import Elmo, ElmoEmbedder
    from elmo.loading import LoadedModel, load_model, load_pretrained
    from elmo.loading.formats import load_bilm_tf, save_bilm_tf, save_pretrained
    from elmo.loading.publish import push_to_hub
    from elmo.modules import BiLM, BiLMOutput, CharCNNEncoder, ScalarMix
    from elmo.tokenize import TOKENIZER_NAMES, Tokenizer, get_tokenizer
