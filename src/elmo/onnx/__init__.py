"""ELMo outside Python: a biLM exported to an ONNX graph, for ONNX Runtime and other engines.

`export_onnx(model, "model.onnx")` (or `elmo export MODEL model.onnx`) writes the stateless
inference biLM; `onnx_inputs(bilm, sentences)` makes its inputs. docs/deployment.md describes
the graph and how to make its inputs without Python. Needs the `onnx` extra.
"""

from elmo.onnx.export import export_onnx
from elmo.onnx.graph import ALL_OUTPUT, INPUTS, MIX_OUTPUT, OPSET
from elmo.onnx.inputs import onnx_inputs

__all__ = ["ALL_OUTPUT", "INPUTS", "MIX_OUTPUT", "OPSET", "export_onnx", "onnx_inputs"]
