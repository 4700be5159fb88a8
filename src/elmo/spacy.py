"""The spaCy pipe "elmo" at its public path; it lives in `elmo.integrations.spacy`."""

from elmo.integrations.spacy import (  # noqa: F401
    DEFAULT_CONFIG,
    FACTORY,
    ElmoPipe,
    make_elmo,
)
