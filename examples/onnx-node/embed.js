// ELMo layers in Node.js from a model exported with `elmo export MODEL model.onnx`.
//   ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm install   (no CUDA download: works offline)
//   node embed.js model.onnx "The cat sat ." "Hello"
// prints {"layers": [per sentence: [layer][token][2P]]} as JSON. Tokens are split on runs of
// whitespace (as Python's str.split()).
"use strict";
const ort = require("onnxruntime-node");

// The character ids of src/elmo/chars.py: UTF-8 bytes (at most 48), wrapped in begin-word /
// end-word marks, padded to 50, every id + 1 (0 marks an absent token).
const MAX_CHARS = 50;
const [BOS, EOS, BOW, EOW, PAD] = [256, 257, 258, 259, 260];

function wordIds(word) {
  let content;
  if (word === "<S>") content = [BOS];
  else if (word === "</S>") content = [EOS];
  else content = Array.from(new TextEncoder().encode(word).slice(0, MAX_CHARS - 2));
  const ids = [BOW, ...content, EOW];
  while (ids.length < MAX_CHARS) ids.push(PAD);
  return ids.map((id) => id + 1);
}

// sentences (arrays of tokens) -> the graph's inputs: char_ids (B, T, 50), lengths (B,)
function inputs(sentences) {
  const longest = Math.max(...sentences.map((s) => s.length));
  const ids = new BigInt64Array(sentences.length * longest * MAX_CHARS); // zeros: padding
  sentences.forEach((sentence, b) => sentence.forEach((word, t) => {
    ids.set(wordIds(word).map(BigInt), (b * longest + t) * MAX_CHARS);
  }));
  return {
    char_ids: new ort.Tensor("int64", ids, [sentences.length, longest, MAX_CHARS]),
    lengths: new ort.Tensor("int64", BigInt64Array.from(sentences, (s) => BigInt(s.length)),
                            [sentences.length]),
  };
}

async function main() {
  const [modelPath, ...lines] = process.argv.slice(2);
  const sentences = lines.map((line) => line.split(/\s+/).filter((token) => token !== ""));
  const session = await ort.InferenceSession.create(modelPath);
  const { layers } = await session.run(inputs(sentences)); // (L+1, B, T, 2P)
  const [nLayers, batch, longest, width] = layers.dims;
  const at = (l, b, t) => Array.from(layers.data.subarray(
    ((l * batch + b) * longest + t) * width, ((l * batch + b) * longest + t + 1) * width));
  const result = sentences.map((sentence, b) => Array.from({ length: nLayers }, (_, l) =>
    sentence.map((_, t) => at(l, b, t))));
  console.log(JSON.stringify({ layers: result }));
}

main();
