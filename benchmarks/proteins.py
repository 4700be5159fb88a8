"""Proteins: residues/s of a SeqVec-sized model on real proteins, ours against AllenNLP's
`ElmoEmbedder` (what SeqVec users call), and the per-residue vectors of both compared.

The sample: a length-stratified set of `--sample` proteins of the DeepLoc test set
(../shared/data/proteins/deeploc_test_set.fasta): the proteins sorted by length, every k-th
taken, so the lengths span the set's (40-5,654 residues). The model: SeqVec's architecture
(the standard ELMo configuration its paper names, as the `original` preset: char-CNN filters
1-7 wide with 32-1024 channels, 2 highway layers, 2 LSTM layers of 4096 cells projected to
512, skip connections) with random weights, written as an official options/weights pair.

Each row runs in a child process with the same threads:
- reference: AllenNLP 0.9's `ElmoEmbedder(options, weights).embed_sentence(list(seq))`, one
  protein at a time from zero state (as SeqVec's users call it); AllenNLP 0.9 does not install
  on today's Python, so its wheel is unpacked and imported on this project's torch, with
  stand-ins for the packages it imports but ElmoEmbedder never calls (its web server, spaCy,
  ...). Give the unpacked wheel with `--allennlp`:

      pip download allennlp==0.9.0 --no-deps -d /tmp/allennlp-dl
      python -m zipfile -e /tmp/allennlp-dl/allennlp-0.9.0-py3-none-any.whl /tmp/allennlp09
      python benchmarks/proteins.py --allennlp /tmp/allennlp09

  The same child computes each protein with ours too (not timed) and reports the largest
  |ours - AllenNLP| over every residue of every layer.
- ours, fp32 and int8: `SeqVecEmbedder(options_file=, weights_file=).embed_many` (batches by
  a token budget, stateless).

`--preset tiny --sample 5` is a quick smoke run; `--sample 3 --longest 300` a short one at
SeqVec's size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import DATA, RESULTS, random_model

from elmo import save_bilm_tf
from elmo.io.fasta import read_fasta

PROTEINS = DATA / "proteins" / "deeploc_test_set.fasta"
# Top-level packages that AllenNLP 0.9 imports at `from allennlp.commands.elmo import
# ElmoEmbedder` and that the embedder never calls.
ALLENNLP_UNUSED = ("spacy flask_cors gevent flask boto3 botocore requests numpydoc jsonpickle "
                   "editdistance ftfy pytorch_pretrained_bert nltk pytorch_transformers "
                   "parsimonious six unidecode word2number conllu tensorboardX sqlparse")

REFERENCE = r"""
import importlib.abc, importlib.machinery, json, sys, time, types
from unittest import mock
import numpy as np, torch
options, weights, sample, threads, unused = sys.argv[1:6]
torch.set_num_threads(int(threads))

class StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in unused.split():
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        module = mock.MagicMock(name=spec.name)
        module.__path__, module.__spec__, module.__name__ = [], spec, spec.name
        return module
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, StandIn())
sys.modules["overrides"] = types.SimpleNamespace(overrides=lambda f: f)
from allennlp.commands.elmo import ElmoEmbedder
from elmo.bio import SeqVecEmbedder

sequences = json.load(open(sample))
reference = ElmoEmbedder(options, weights, cuda_device=-1)
ours = SeqVecEmbedder(options_file=options, weights_file=weights, device="cpu")
seconds, worst = 0.0, 0.0
for sequence in sequences:
    reference.elmo_bilm._elmo_lstm.reset_states()  # each protein alone, from zero state
    start = time.perf_counter()
    expected = reference.embed_sentence(list(sequence))
    seconds += time.perf_counter() - start
    worst = max(worst, float(np.abs(ours.embed(sequence) - expected).max()))
print(json.dumps({"seconds": seconds, "residues": sum(map(len, sequences)),
                  "max_abs_diff": worst}))
"""

OURS = r"""
import json, sys, time, torch
from elmo.bio import SeqVecEmbedder
options, weights, sample, threads, quantize = sys.argv[1:6]
torch.set_num_threads(int(threads))
sequences = json.load(open(sample))
embedder = SeqVecEmbedder(options_file=options, weights_file=weights, device="cpu",
                          quantize=None if quantize == "fp32" else quantize)
start = time.perf_counter()
for _ in embedder.embed_many(sequences):
    pass
print(json.dumps({"seconds": time.perf_counter() - start,
                  "residues": sum(map(len, sequences))}))
"""


def stratified_sample(path: Path, size: int, longest: int | None = None) -> list[str]:
    """`size` sequences spread evenly over the length order of the file's records (of those
    of at most `longest` residues, if given)."""
    sequences = sorted((r.sequence for r in read_fasta(path)
                        if longest is None or len(r.sequence) <= longest), key=len)
    if size >= len(sequences):
        return sequences
    step = (len(sequences) - 1) / max(size - 1, 1)
    return [sequences[round(i * step)] for i in range(size)]


def child(script: str, *args: str, pythonpath: str | None = None) -> dict:
    env = None
    if pythonpath is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (pythonpath, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                          check=True, text=True, env=env)
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allennlp", type=Path, required=True,
                        help="the unpacked allennlp-0.9.0 wheel (see the module docstring)")
    parser.add_argument("--sample", type=int, default=200, help="proteins (default 200)")
    parser.add_argument("--preset", default="original",
                        help="model size: original (SeqVec's, default) or tiny (a smoke run)")
    parser.add_argument("--longest", type=int, default=None,
                        help="sample only proteins of at most this many residues (a smoke run; "
                        "default: all)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--int8", action=argparse.BooleanOptionalAction, default=True,
                        help="time ours in int8 too (default; --no-int8 leaves it out: on a "
                        "CPU without VNNI a one-row int8 product is slow, see docs/proteins.md)")
    parser.add_argument("--out", type=Path, default=RESULTS / "proteins.json")
    args = parser.parse_args()
    if not PROTEINS.is_file():
        sys.exit(f"proteins not found: {PROTEINS} (set ELMO_SHARED)")
    if not (args.allennlp / "allennlp" / "commands" / "elmo.py").is_file():
        sys.exit(f"{args.allennlp} is not an unpacked allennlp 0.9 wheel")
    sequences = stratified_sample(PROTEINS, args.sample, args.longest)
    threads = str(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        options, weights = save_bilm_tf(random_model(args.preset), Path(tmp) / "model")
        sample = Path(tmp) / "sample.json"
        sample.write_text(json.dumps(sequences))
        files = (str(options), str(weights), str(sample), threads)
        rows = {
            "reference (AllenNLP 0.9 ElmoEmbedder)": child(
                REFERENCE, *files, ALLENNLP_UNUSED, pythonpath=str(args.allennlp)),
            "ours, fp32": child(OURS, *files, "fp32"),
        }
        if args.int8:
            rows["ours, int8"] = child(OURS, *files, "int8")
    reference = rows["reference (AllenNLP 0.9 ElmoEmbedder)"]
    lengths = sorted(map(len, sequences))
    print(f"{len(sequences)} proteins of {lengths[0]}-{lengths[-1]} residues (median "
          f"{lengths[len(lengths) // 2]}), {sum(lengths):,} residues; preset {args.preset}, "
          f"{args.threads} thread(s)")
    print(f"{'':40}{'residues/s':>11}{'x ref':>7}")
    for name, r in rows.items():
        r["residues_per_s"] = r["residues"] / r["seconds"]
        r["speedup_over_reference"] = r["residues_per_s"] / (reference["residues"]
                                                             / reference["seconds"])
        print(f"{name:40}{r['residues_per_s']:11.0f}{r['speedup_over_reference']:7.1f}")
    print(f"max |ours - AllenNLP| over every layer of every residue, each protein alone: "
          f"{reference['max_abs_diff']:.2g}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"sample": len(sequences), "residues": sum(lengths),
                                    "preset": args.preset, "threads": args.threads,
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
