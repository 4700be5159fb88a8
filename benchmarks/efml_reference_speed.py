"""ELMoForManyLangs: our embedding speed against the reference package, same model and text.

The reference (`elmoformanylangs`) is not a dependency: install it in a throw-away
environment and pass its interpreter, e.g.

    python3 -m venv /tmp/efml-ref
    /tmp/efml-ref/bin/pip install /path/to/torch-2.13.0+cpu.whl elmoformanylangs "overrides==3.1.0"
    python benchmarks/efml_reference_speed.py --reference-python /tmp/efml-ref/bin/python

(overrides 3.1.0: later versions reject the package's `@overrides` on Highway.forward.)
With that interpreter, the package's own classes build a model of the released size (its
bundled cnn_50_100_512_4096_sample.json, random weights) whose config.json names that config
by an absolute path that does not exist, as the released models do. Then, each in a child
process with the same threads: the reference's `Embedder.sents2elmo` (batch_size 64), ours
on the same directory (`Embedder.from_pretrained`, fp32 and int8), and our `original` preset (byte
encoder, same LSTM size) with random weights. Reports tokens/s and the max |difference|
between the reference and us on one batch (where the reference's state starts at zero).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, SHARED

REFERENCE_BUILD = r"""
import json, os, sys, torch
import elmoformanylangs
from elmoformanylangs.frontend import Model
from elmoformanylangs.modules.embedding_layer import EmbeddingLayer
out, text = sys.argv[1:3]
torch.manual_seed(0)
name = "cnn_50_100_512_4096_sample.json"
bundled = os.path.join(os.path.dirname(elmoformanylangs.__file__), "configs", name)
config = json.load(open(bundled))
os.makedirs(out)
json.dump({"config_path": "/users4/conll18st/elmo/configs/" + name},
          open(os.path.join(out, "config.json"), "w"))
words = open(text, encoding="utf-8").read().split()
specials = ["<oov>", "<bos>", "<eos>", "<pad>"]
lexicons = {"char.dic": sorted(set("".join(words))) + specials + ["<bow>", "<eow>"],
            "word.dic": specials + sorted(set(words))}
layers = {}
for file, tokens in lexicons.items():
    with open(os.path.join(out, file), "w", encoding="utf-8") as f:
        f.writelines(f"{t}\t{i}\n" for i, t in enumerate(tokens))
    dim = config["token_embedder"]["char_dim" if file == "char.dic" else "word_dim"]
    layers[file] = EmbeddingLayer(dim, {t: i for i, t in enumerate(tokens)}, fix_emb=False)
model = Model(config, layers["word.dic"], layers["char.dic"], use_cuda=False)
with torch.no_grad():  # biases too, so that no gate sits at its initial value
    for p in model.parameters():
        if p.dim() == 1:
            p.uniform_(-0.5, 0.5)
torch.save(model.token_embedder.state_dict(), os.path.join(out, "token_embedder.pkl"))
torch.save(model.encoder.state_dict(), os.path.join(out, "encoder.pkl"))
"""

REFERENCE_TIME = r"""
import json, logging, sys, time, numpy as np, torch
from elmoformanylangs import Embedder
model, text, threads, check = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
torch.set_num_threads(threads)
logging.disable(logging.INFO)
sentences = [line.split() for line in open(text, encoding="utf-8") if line.split()]
embedder = Embedder(model, batch_size=64)
start = time.perf_counter()
embedder.sents2elmo(sentences, output_layer=-1)
seconds = time.perf_counter() - start
first = Embedder(model, batch_size=64).sents2elmo(sentences[:64], output_layer=-2)
np.savez(check, *first)
print(json.dumps({"seconds": seconds, "tokens": sum(map(len, sentences))}))
"""

OURS_TIME = r"""
import json, sys, time, numpy as np, torch
from elmo import BiLM, BiLMConfig, Embedder
model, text, threads, check, quantize = sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:6]
quantize = None if quantize == "fp32" else quantize
torch.set_num_threads(threads)
sentences = [line.split() for line in open(text, encoding="utf-8") if line.split()]
if model == "original":
    torch.manual_seed(0)
    embedder = Embedder(BiLM(BiLMConfig.preset("original")).eval(), quantize=quantize)
else:
    embedder = Embedder.from_pretrained(model, quantize=quantize)
start = time.perf_counter()
embedder.embed_sentences(sentences)
seconds = time.perf_counter() - start
result = {"seconds": seconds, "tokens": sum(map(len, sentences))}
if check != "-":
    expected = np.load(check)
    got = embedder.embed_sentences(sentences[:64])
    result["max_abs_diff"] = max(float(abs(g - expected[f"arr_{i}"]).max())
                                 for i, g in enumerate(got))
print(json.dumps(result))
"""


def child(python: str, script: str, *args: str) -> dict:
    proc = subprocess.run([python, "-c", script, *args], stdout=subprocess.PIPE, check=True,
                          text=True)
    return json.loads(proc.stdout.splitlines()[-1]) if proc.stdout.strip() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-python", required=True,
                        help="python of an environment with elmoformanylangs installed")
    parser.add_argument("--workload", default="sentences_256.txt",
                        help="a file of ../shared/bench (default sentences_256.txt)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", type=Path,
                        default=REPO / "benchmarks/results/efml_reference_speed.json")
    args = parser.parse_args()
    text = SHARED / "bench" / args.workload
    if not text.is_file():
        sys.exit(f"workload not found: {text} (set ELMO_SHARED)")
    threads = str(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model, check = Path(tmp) / "efml.model", Path(tmp) / "reference_first_batch.npz"
        child(args.reference_python, REFERENCE_BUILD, str(model), str(text))
        rows = {
            "reference (elmoformanylangs)": child(args.reference_python, REFERENCE_TIME,
                                                  str(model), str(text), threads, str(check)),
            "ours, EfML model": child(sys.executable, OURS_TIME, str(model), str(text), threads,
                                      str(check), "fp32"),
            "ours, EfML model, int8": child(sys.executable, OURS_TIME, str(model), str(text),
                                            threads, "-", "int8"),
            "ours, original preset": child(sys.executable, OURS_TIME, "original", str(text),
                                           threads, "-", "fp32"),
        }
    reference = rows["reference (elmoformanylangs)"]
    print(f"{args.workload}, {args.threads} thread(s)")
    print(f"{'':30}{'tok/s':>8}{'x ref':>7}  max |ours - ref| (first batch)")
    for name, r in rows.items():
        r["tokens_per_s"] = r["tokens"] / r["seconds"]
        r["speedup_over_reference"] = r["tokens_per_s"] / (reference["tokens"]
                                                           / reference["seconds"])
        diff = f"{r['max_abs_diff']:.2g}" if "max_abs_diff" in r else ""
        print(f"{name:30}{r['tokens_per_s']:8.0f}{r['speedup_over_reference']:7.1f}  {diff}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"workload": args.workload, "threads": args.threads,
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
