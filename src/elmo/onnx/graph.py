"""A biLM as an ONNX graph: character ids and sentence lengths in, ELMo's layers out.

The graph computes what `BiLM.forward` computes, stateless and without the boundary tokens:

- `<S>` and `</S>` are added around every sentence, as `add_boundaries` does;
- the char-CNN runs once per distinct token of the batch (`Unique`), over as many character
  positions as the longest token needs (exact, as in `CharCNNEncoder._encode`);
- each LSTM layer is one `Scan` over time whose body is the projected, clipped cell of
  `ProjectedLSTM` written in MatMul, Sigmoid, Tanh and Clip nodes, both directions stacked on a
  leading axis of 2 (the backward direction reads each sentence reversed within its own length,
  so it starts at the sentence's last token);
- positions at or beyond a sentence's length are computed but never read by its real
  positions, and are zero in the output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from elmo.extras import import_extra
from elmo.layer_choice import LayerChoice, parse_layer_choice
from elmo.modules.bilm import BiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.lstm import ProjectedLSTM

onnx = import_extra("onnx", "exporting a biLM to ONNX")
helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto

OPSET = 18
# The oldest IR version that opset 18 allows, so that runtimes older than the onnx package
# writing the file still read it (onnx 1.23 would write 14; ONNX Runtime 1.20 reads <= 10).
IR_VERSION = 8
INPUTS = ("char_ids", "lengths")  # (batch, tokens, width) int64, (batch,) int64
MIX_OUTPUT = "embeddings"  # (batch, tokens, width): one layer, a mix of them, ...
ALL_OUTPUT = "layers"  # (L+1, batch, tokens, 2P)


@dataclass
class GraphBuilder:
    """Nodes and initializers of one ONNX graph; every value gets a fresh name."""

    prefix: str = ""
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    count: int = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{self.prefix}{hint}_{self.count}"

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attributes) -> str | list[str]:
        """Add a node; its output name, or a list of `outputs` names."""
        names = [self.fresh(op_type) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attributes))
        return names[0] if outputs == 1 else names

    def const(self, value: np.ndarray | list | float | int, hint: str = "const",
              dtype: type = np.int64) -> str:
        """An initializer holding `value` (a numpy array keeps its dtype)."""
        array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, tensor, hint: str) -> str:
        """A float32 initializer from a torch tensor."""
        return self.const(tensor.detach().float().cpu().numpy(), hint)


def bilm_graph(bilm: BiLM, layers: str | int | LayerChoice = "all") -> onnx.ModelProto:
    """The ONNX model of `bilm` (fp32, CPU copy of its weights); `layers`, a layer choice
    (`elmo.layer_choice`): "all" outputs every layer, the others ("top", "average", "sum",
    a layer number, ...) one (batch, tokens, width) tensor, as the choice builds it."""
    choice = parse_layer_choice(layers)
    g = GraphBuilder()
    char_ids, lengths = INPUTS
    wrapped = _add_boundaries(g, bilm, char_ids, lengths)  # (B, T+2, W)
    tokens = _encode_tokens(g, bilm.token_encoder, wrapped)  # (B, T+2, P)
    wrapped_lengths = g.op("Add", lengths, g.const(2))  # (B,)
    reverse = _reverse_index(g, tokens, wrapped_lengths)  # (B, T+2, P) for GatherElements
    x = g.op("Concat", g.op("Unsqueeze", tokens, g.const([0])),
             g.op("Unsqueeze", g.op("GatherElements", tokens, reverse, axis=1), g.const([0])),
             axis=0)  # (2, B, T+2, P): forward, backward in reading order
    per_layer = [g.op("Concat", tokens, tokens, axis=-1)]  # each (B, T+2, 2P)
    for k, layer in enumerate(bilm.lstm.layers):
        h = _lstm_layer(g, layer, x, k)  # (2, B, T+2, P)
        if bilm.lstm.use_skip_connections and k > 0:
            h = g.op("Add", h, x)
        forward, backward = g.op("Split", h, axis=0, num_outputs=2, outputs=2)
        backward = g.op("GatherElements", g.op("Squeeze", backward, g.const([0])), reverse,
                        axis=1)
        per_layer.append(g.op("Concat", g.op("Squeeze", forward, g.const([0])), backward,
                              axis=-1))
        x = h
    stacked = g.op("Concat", *(g.op("Unsqueeze", v, g.const([0])) for v in per_layer), axis=0)
    words = g.op("Slice", stacked, g.const([1]), g.const([-1]), g.const([2]))  # (L+1,B,T,2P)
    positions = g.op("Range", g.const(0), g.op("Gather", g.op("Shape", char_ids), g.const(1)),
                     g.const(1))  # (T,)
    mask = g.op("Less", g.op("Unsqueeze", positions, g.const([0])),
                g.op("Unsqueeze", lengths, g.const([1])))  # (B, T)
    mask = g.op("Unsqueeze", mask, g.const([0, 3]))  # (1, B, T, 1)
    result = g.op("Where", mask, words, g.const(np.zeros((), np.float32)))
    output = choice.onnx(g, result, bilm.num_layers)
    name = ALL_OUTPUT if choice.stacked else MIX_OUTPUT
    g.nodes.append(helper.make_node("Identity", [output], [name]))

    width = bilm.indexer.width
    *layer_axis, tokens, kept = choice.shape(bilm.num_layers, "tokens",
                                             2 * bilm.config.projection_dim)
    graph = helper.make_graph(
        g.nodes, "elmo_bilm",
        [helper.make_tensor_value_info(char_ids, TensorProto.INT64, ["batch", "tokens", width]),
         helper.make_tensor_value_info(lengths, TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                       [*layer_axis, "batch", tokens, kept])],
        g.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION, producer_name="elmo")


def _add_boundaries(g: GraphBuilder, bilm: BiLM, char_ids: str, lengths: str) -> str:
    """char_ids (B, T, W) -> (B, T+2, W) holding `<S>, tokens, </S>` (see `add_boundaries`)."""
    width = bilm.indexer.width
    shape = g.op("Shape", char_ids)
    batch = g.op("Slice", shape, g.const([0]), g.const([1]))  # (1,) = [B]
    column_shape = g.op("Concat", batch, g.const([1, width]), axis=0)  # [B, 1, W]
    bos = g.op("Expand", g.const(bilm.bos_ids.cpu().numpy().reshape(1, 1, width)), column_shape)
    end = g.op("ConstantOfShape", column_shape,
               value=numpy_helper.from_array(np.zeros(1, np.int64)))
    wrapped = g.op("Concat", bos, char_ids, end, axis=1)  # (B, T+2, W)
    steps = g.op("Add", g.op("Gather", shape, g.const(1)), g.const(2))  # T+2
    positions = g.op("Range", g.const(0), steps, g.const(1))  # (T+2,)
    is_eos = g.op("Equal", g.op("Unsqueeze", positions, g.const([0])),
                  g.op("Unsqueeze", g.op("Add", lengths, g.const(1)), g.const([1])))  # (B, T+2)
    eos = g.const(bilm.eos_ids.cpu().numpy())  # (W,)
    return g.op("Where", g.op("Unsqueeze", is_eos, g.const([2])), eos, wrapped)


def _encode_tokens(g: GraphBuilder, encoder: CharCNNEncoder, char_ids: str) -> str:
    """char_ids (B, T, W) -> token vectors (B, T, P), the char-CNN run once per distinct row."""
    width = encoder.n_chars + (1 if encoder.word_embedding is not None else 0)
    flat = g.op("Reshape", char_ids, g.const([-1, width]))  # (N, W)
    distinct, _, inverse, _ = g.op("Unique", flat, axis=0, sorted=1, outputs=4)  # (U, W), (N,)
    vectors = g.op("Gather", _char_cnn(g, encoder, distinct), inverse)  # (N, P)
    out_shape = g.op("Concat", g.op("Slice", g.op("Shape", char_ids), g.const([0]), g.const([2])),
                     g.const([-1]), axis=0)  # [B, T, P]
    return g.op("Reshape", vectors, out_shape)


def _char_cnn(g: GraphBuilder, encoder: CharCNNEncoder, ids: str) -> str:
    """ids (U, W) -> (U, P): `CharCNNEncoder._encode` over the positions the longest token
    needs (its chars, then as many as the widest filter; every window beyond equals one kept)."""
    config = encoder.config
    chars = g.op("Slice", ids, g.const([0]), g.const([encoder.n_chars]), g.const([1]))  # (U, C)
    real = g.op("And", g.op("Not", g.op("Equal", chars, g.const(0))),
                g.op("Not", g.op("Equal", chars, g.const(encoder.pad_id))))  # (U, C)
    longest = g.op("ReduceMax", g.op("ReduceSum", g.op("Cast", real, to=TensorProto.INT64),
                                     g.const([1]), keepdims=0), keepdims=1)  # (1,)
    widest = max(w for w, _ in config.filters)
    keep = g.op("Min", g.op("Add", longest, g.const([widest])), g.const([encoder.n_chars]))
    chars = g.op("Slice", chars, g.const([0]), keep, g.const([1]))  # (U, K)
    x = g.op("Gather", g.weight(encoder.char_embedding.weight, "char_embedding"), chars)
    x = g.op("Transpose", x, perm=[0, 2, 1])  # (U, E, K)
    activation = "Tanh" if config.activation == "tanh" else "Relu"
    pooled = [g.op(activation, g.op("ReduceMax", g.op("Conv", x, g.weight(conv.weight, "conv_w"),
                                                      g.weight(conv.bias, "conv_b")),
                                    g.const([2]), keepdims=0))
              for conv in encoder.convolutions]  # each (U, count)
    x = g.op("Concat", *pooled, axis=1)  # (U, F)
    for highway in encoder.highways:
        gate = g.op("Sigmoid", _linear(g, x, highway.gate))
        transformed = g.op("Relu", _linear(g, x, highway.transform))
        keep_x = g.op("Sub", g.const(np.ones((), np.float32)), gate)
        x = g.op("Add", g.op("Mul", gate, transformed), g.op("Mul", keep_x, x))
    if encoder.word_embedding is not None:  # [word vector, char-CNN vector]
        words = g.op("Gather", ids, g.const(encoder.n_chars), axis=1)  # (U,)
        x = g.op("Concat", g.op("Gather", g.weight(encoder.word_embedding.weight, "word_emb"),
                                words), x, axis=1)
    return _linear(g, x, encoder.projection)  # (U, P)


def _linear(g: GraphBuilder, x: str, linear) -> str:
    """x (N, in) -> x W^T + b (N, out) for an `nn.Linear`."""
    return g.op("Gemm", x, g.weight(linear.weight, "linear_w"), g.weight(linear.bias, "linear_b"),
                transB=1)


def _reverse_index(g: GraphBuilder, x: str, lengths: str) -> str:
    """For x (B, T, P): the GatherElements index (B, T, P) reversing each row's first
    `lengths[b]` positions, padding in place (`reverse_within_lengths`); its own inverse."""
    steps = g.op("Gather", g.op("Shape", x), g.const(1))
    positions = g.op("Unsqueeze", g.op("Range", g.const(0), steps, g.const(1)), g.const([0]))
    row_lengths = g.op("Unsqueeze", lengths, g.const([1]))  # (B, 1)
    reversed_positions = g.op("Sub", g.op("Sub", row_lengths, g.const(1)), positions)
    index = g.op("Where", g.op("Less", positions, row_lengths), reversed_positions,
                 positions)  # (B, T)
    return g.op("Expand", g.op("Unsqueeze", index, g.const([2])), g.op("Shape", x))


def _lstm_layer(g: GraphBuilder, layer: ProjectedLSTM, x: str, k: int) -> str:
    """x (2, B, T, I) -> h (2, B, T, P): one `Scan` over T of `_cell_body`."""
    d, p, c = layer.bias.shape[0], layer.proj_dim, layer.cell_dim
    bias = (layer.bias + layer.forget_bias).unsqueeze(1)  # (D, 1, 4C), as ProjectedLSTM
    shape = g.op("Shape", x)
    flat = g.op("Reshape", x, g.op("Concat", g.const([d, -1]),
                                   g.op("Slice", shape, g.const([3]), g.const([4])), axis=0))
    x_gates = g.op("Add", _matmul(g, flat, layer.input_weight, f"l{k}_input"),
                   g.weight(bias, f"l{k}_bias"))  # (D, B*T, 4C)
    x_gates = g.op("Reshape", x_gates, g.op("Concat", g.op("Slice", shape, g.const([0]),
                                                           g.const([3])), g.const([4 * c]),
                                            axis=0))  # (D, B, T, 4C)
    state_shape = g.op("Slice", shape, g.const([0]), g.const([2]))  # [D, B]
    zero = numpy_helper.from_array(np.zeros(1, np.float32))
    h0 = g.op("ConstantOfShape", g.op("Concat", state_shape, g.const([p]), axis=0), value=zero)
    c0 = g.op("ConstantOfShape", g.op("Concat", state_shape, g.const([c]), axis=0), value=zero)
    body = _cell_body(layer, k)
    _, _, h = g.op("Scan", h0, c0, x_gates, body=body, num_scan_inputs=1,
                   scan_input_axes=[2], scan_output_axes=[2], outputs=3)
    return h


def _cell_body(layer: ProjectedLSTM, k: int) -> onnx.GraphProto:
    """The Scan body: (h (D, B, P), c (D, B, C), x_gates_t (D, B, 4C)) -> (h, c, h).

    Gates in TensorFlow's order i, j, f, o, the forget bias already in x_gates:
        c = sigmoid(f) * c_prev + sigmoid(i) * tanh(j),  c = clip(c, cell_clip)
        h = clip((sigmoid(o) * tanh(c)) @ W_proj, proj_clip)
    The body holds its own weights (as initializers, which is what int8 quantization reads).
    """
    b = GraphBuilder(prefix=f"l{k}_cell_")
    h_in, c_in, x_in = "h_prev", "c_prev", "x_gates_t"
    h_in, c_in, x_in = (f"l{k}_cell_{n}" for n in (h_in, c_in, x_in))
    gates = b.op("Add", x_in, _matmul(b, h_in, layer.state_weight, "state"))  # (D, B, 4C)
    i, j, f, o = b.op("Split", gates, axis=-1, num_outputs=4, outputs=4)  # each (D, B, C)
    c = b.op("Add", b.op("Mul", b.op("Sigmoid", f), c_in),
             b.op("Mul", b.op("Sigmoid", i), b.op("Tanh", j)))
    if layer.cell_clip is not None:
        c = _clip(b, c, layer.cell_clip)
    h = _matmul(b, b.op("Mul", b.op("Sigmoid", o), b.op("Tanh", c)), layer.proj_weight, "proj")
    if layer.proj_clip is not None:
        h = _clip(b, h, layer.proj_clip)
    names = (f"l{k}_cell_h", f"l{k}_cell_c", f"l{k}_cell_h_t")
    b.nodes += [helper.make_node("Identity", [v], [n]) for v, n in zip((h, c, h), names,
                                                                       strict=True)]
    d, p, cell = layer.bias.shape[0], layer.proj_dim, layer.cell_dim
    def info(name: str, width: int) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [d, "batch", width])
    return helper.make_graph(
        b.nodes, f"lstm_layer_{k}", [info(h_in, p), info(c_in, cell), info(x_in, 4 * cell)],
        [info(names[0], p), info(names[1], cell), info(names[2], p)], b.initializers)


def _matmul(g: GraphBuilder, x: str, weight, hint: str) -> str:
    """x (D, M, K) @ weight (D, K, N) -> (D, M, N), one MatMul per direction on a 2-D weight
    (K, N): what int8 quantization quantizes per output channel."""
    d = weight.shape[0]
    parts = g.op("Split", x, axis=0, num_outputs=d, outputs=d) if d > 1 else [x]
    products = [g.op("MatMul", part, g.weight(weight[k], f"{hint}{k}"))
                for k, part in enumerate(parts)]  # each (1, M, N)
    return g.op("Concat", *products, axis=0) if d > 1 else products[0]


def _clip(g: GraphBuilder, x: str, bound: float) -> str:
    low, high = (g.const(np.asarray(v, np.float32)) for v in (-bound, bound))
    return g.op("Clip", x, low, high)
