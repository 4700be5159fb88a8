"""`export_onnx`: a biLM -> a checked ONNX file (see `elmo.onnx.graph` for the graph)."""

from __future__ import annotations

from pathlib import Path

from elmo.errors import ElmoError
from elmo.io.atomic import atomic_output, claim_output
from elmo.layer_choice import LayerChoice, parse_layer_choice
from elmo.loading.load import load_model
from elmo.modules.bilm import BiLM
from elmo.onnx.graph import bilm_graph, onnx


def export_onnx(
    model: BiLM | str | Path,
    path: str | Path,
    *,
    layers: str | int | LayerChoice = "all",
    overwrite: bool = False,
) -> Path:
    """Write `model` (a BiLM, or any MODEL `elmo.load_model` takes) to the ONNX file `path`.

    The graph takes `char_ids` (batch, tokens, width) int64, as `model.batch_to_ids` makes
    them, and `lengths` (batch,) int64; it outputs `layers` (L+1, batch, tokens, 2P) float32,
    or with another layer choice (`elmo.layer_choice`: "top", "average", "sum", a layer
    number, ...) `embeddings` (batch, tokens, width). The file is checked (`onnx.checker`,
    full shape inference) before it is renamed into place; an existing `path` is refused
    unless `overwrite`. Returns `path`.
    """
    bilm = model if isinstance(model, BiLM) else load_model(model).bilm
    if bilm.quantization is not None:
        raise ElmoError(f"the model is quantized ({bilm.quantization}), which drops its fp32 "
                        "weights: export the fp32 model (load it without quantize)")
    choice = parse_layer_choice(layers)
    choice.check(bilm.num_layers)
    graph = bilm_graph(bilm, choice)
    onnx.checker.check_model(graph, full_check=True)
    sources = [model] if isinstance(model, str | Path) and Path(model).exists() else []
    with claim_output(path, inputs=sources, overwrite=overwrite) as out, \
            atomic_output(out) as tmp:
        onnx.save(graph, tmp)
    return Path(path)

