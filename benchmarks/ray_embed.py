"""`elmo embed --ray` against `elmo embed`: tokens/s on the same input (the first `--lines`
non-empty lines of WikiText-2's validation text, the shipped `default` model unless `--model`,
all layers), one run each, every run in its own process: `elmo embed` with 1 and 2 torch
threads, `elmo embed --ray` with 1 and 2 workers of 1 thread (a Ray started on this machine).

- tokens/s of `elmo embed`: `Embedder.embed_file` (reading, embedding, writing the HDF5 file),
  the model loaded before the clock starts.
- tokens/s of `--ray`: `elmo.ray.embed_files` from the start of the Ray job to its last block
  (actors starting and loading their model included; starting Ray itself not: `ray start s`).
- ratio: `--ray` tokens/s over `elmo embed`'s at the same total thread count (the target on
  2 cores: at least 0.9).
- Ray's overhead per block: worker time not spent inside a block (actor start and model load,
  scheduling, results), (job seconds x workers - the blocks' own seconds) / blocks.

    python benchmarks/ray_embed.py [--lines 4000] [--block-lines 256] [--model default]
    python benchmarks/ray_embed.py --quick      # a smoke run: 40 lines, blocks of 10

Prints a table and writes benchmarks/results/ray_embed.json (--quick: under $TMPDIR).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import DATA, machine_info, results_file, write_json

EMBED = r"""
import json, sys, time
import torch
from elmo.embed import Embedder
from elmo.tokenize import get_tokenizer
model, text, out, threads = sys.argv[1:5]
torch.set_num_threads(int(threads))
embedder = Embedder.from_pretrained(model)
tokenize = get_tokenizer(embedder.tokenizer)
with open(text, encoding="utf-8") as f:
    tokens = sum(len(tokenize(line.strip())) for line in f)
start = time.perf_counter()
embedder.embed_file(text, out, progress=False)
print(json.dumps({"seconds": time.perf_counter() - start, "tokens": tokens}))
"""

RAY = r"""
import json, sys, time
from elmo.ray import embed_files
model, text, out, workers, block_lines = sys.argv[1:6]
start = time.perf_counter()
run = embed_files(model, text, out, workers=int(workers), threads=1,
                  block_lines=int(block_lines), progress=False)
print(json.dumps({"wall_seconds": time.perf_counter() - start, "tokens": run.tokens,
                  "blocks": run.blocks, "startup_seconds": run.startup_seconds,
                  "seconds": run.job_seconds, "block_seconds": run.block_seconds}))
"""


def child(script: str, *args: object) -> dict:
    """Run `script` in a fresh Python with `args`; its last stdout line, as JSON."""
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], check=True,
                          stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=4000)
    parser.add_argument("--block-lines", type=int, default=256)
    parser.add_argument("--model", default="default")
    parser.add_argument("--quick", action="store_true", help="smoke run: 40 lines, blocks of 10")
    parser.add_argument("--out", type=Path, help="JSON results (default: "
                        "benchmarks/results/ray_embed.json; --quick: under $TMPDIR)")
    args = parser.parse_args()
    if args.quick:
        args.lines, args.block_lines = 40, 10
    work = Path(tempfile.mkdtemp(prefix="elmo-ray-embed-"))
    with open(DATA / "wikitext-2" / "valid.txt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()][: args.lines]
    text = work / "in.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")

    rows = []
    for n in (1, 2):
        embed = child(EMBED, args.model, text, work / f"embed{n}.hdf5", n)
        ray = child(RAY, args.model, text, work / f"ray{n}", n, args.block_lines)
        embed_rate, ray_rate = embed["tokens"] / embed["seconds"], ray["tokens"] / ray["seconds"]
        overhead = (ray["seconds"] * n - sum(ray["block_seconds"])) / ray["blocks"]
        rows.append({"threads": n, "embed": embed, "ray": ray,
                     "embed_tokens_per_s": embed_rate, "ray_tokens_per_s": ray_rate,
                     "ratio": ray_rate / embed_rate, "ray_overhead_per_block_s": overhead})
        print(f"{n} thread(s)/worker(s) done: ratio {ray_rate / embed_rate:.2f}", flush=True)

    print(f"\n{args.lines} lines, {rows[0]['ray']['tokens']:,} tokens, model {args.model}, "
          f"blocks of {args.block_lines} lines")
    print("threads  embed tok/s  --ray workers  --ray tok/s  ratio  Ray s/block  ray start s")
    for row in rows:
        print(f"{row['threads']:7d}  {row['embed_tokens_per_s']:11,.0f}  {row['threads']:13d}  "
              f"{row['ray_tokens_per_s']:11,.0f}  {row['ratio']:5.2f}  "
              f"{row['ray_overhead_per_block_s']:11.3f}  {row['ray']['startup_seconds']:11.1f}")
    write_json(args.out or results_file("ray_embed.json", args.quick), {
        "lines": args.lines, "block_lines": args.block_lines, "model": args.model,
        "machine": machine_info(), "rows": rows})


if __name__ == "__main__":
    main()
