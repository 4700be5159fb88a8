"""Adapters named after the library they plug into: AllenNLP's `Elmo` and `ElmoEmbedder`
(`allennlp`), flair's `ELMoEmbeddings` (`flair`), the spaCy pipe "elmo" (`spacy`) and
simple_elmo's `ElmoModel` (`simple_elmo`). Each is a thin layer over the `Embedder` and
`load_model`, imports its library through `elmo.extras.import_extra` and no other adapter.
Users import them by their public paths, `elmo.allennlp`, `elmo.flair`, `elmo.spacy` and
`elmo.simple_elmo`, which re-export them.
"""
