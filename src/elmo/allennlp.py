"""AllenNLP's ELMo names (`Elmo`, `ElmoEmbedder`) at their public path; they live in
`elmo.integrations.allennlp`."""

from elmo.integrations.allennlp import (  # noqa: F401
    ALLENNLP_DEFAULT_MODEL,
    DEFAULT_BATCH_SIZE,
    Elmo,
    ElmoEmbedder,
)
