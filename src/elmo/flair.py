"""flair's `ELMoEmbeddings` at its public path (importing it registers the class with
flair); it lives in `elmo.integrations.flair`."""

from elmo.integrations.flair import (  # noqa: F401
    FLAIR_DEFAULT_MODEL,
    ELMoEmbeddings,
    flair_model,
)
