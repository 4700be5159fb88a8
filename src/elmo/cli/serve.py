"""`elmo serve`: contextual vectors over HTTP, with concurrent requests batched together."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from elmo.cli.common import (
    add_official_pair,
    add_setting,
    add_settings,
    model_files,
    model_help,
    settings_given,
)
from elmo.extras import import_extra
from elmo.loading.resolve import DEFAULT_MODEL
from elmo.serve.limits import ServeLimits

USAGE = """elmo serve [options] [MODEL]
       elmo serve [options] --options FILE --weights FILE"""

def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        usage=USAGE,
        help="serve contextual vectors over HTTP (TEI's routes and OpenAI's /v1/embeddings)",
        description=f"Serve MODEL (default: the shipped model; else {model_help()}) "
        "over HTTP: POST /embed_all (token vectors), /embed and / (one vector per input), "
        "/v1/embeddings (OpenAI's API), /tokenize; GET /info, /health, /metrics "
        "(Prometheus). Concurrent requests are embedded together. The model loads after the "
        "server starts listening: /health answers 503 until it is ready, then 200. SIGTERM "
        "or Ctrl-C: stop accepting, answer the requests in flight, exit 0. Needs the serve "
        "extra: pip install 'elmo-bilm[serve]'.",
    )
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help=f"{model_help()} (default: {DEFAULT_MODEL})")
    add_official_pair(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; 0.0.0.0 for every interface (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="0: any free port (default 8080)")
    for limit in fields(ServeLimits):
        p.add_argument(f"--{limit.name.replace('_', '-')}", type=int, default=limit.default,
                       metavar="N", help=f"{limit.metadata['help']} (default {limit.default:,})")
    add_setting(p, "layers", "/embed_all's answer when the request does not say (D = 2P)")
    add_settings(p, ("tokenizer", "device", "quantize", "precision", "cuda_graphs"))
    p.add_argument("--access-log", action="store_true", help="log one line per request")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    files = model_files(args.model, args)  # a MODEL that names nothing fails before serving
    for module in ("fastapi", "uvicorn", "prometheus_client", "orjson"):
        import_extra(module, "elmo serve")
    from elmo.embedding import Embedder
    from elmo.serve.app import create_app
    from elmo.serve.server import address, bind, make_server
    from elmo.serve.server import run as run_server

    limits = ServeLimits(**{limit.name: getattr(args, limit.name) for limit in fields(ServeLimits)})
    settings = settings_given(args, max_tokens=limits.max_batch_tokens)

    def load() -> Embedder:
        return Embedder.from_pretrained(files, **settings.embedder_options())

    failures: list[Exception] = []

    def on_ready(embedder: Embedder) -> None:
        print(f"elmo: ready: {files.name} on {embedder.device}", file=sys.stderr, flush=True)

    def on_failure(err: Exception) -> None:
        failures.append(err)
        server.should_exit = True

    sock = bind(args.host, args.port)
    app = create_app(load, model_name=files.name, model_format=files.format, layers=args.layers,
                     limits=limits, on_ready=on_ready, on_failure=on_failure)
    server = make_server(app, limits, access_log=args.access_log)
    print(f"elmo: serving {files.name} on {address(sock)} (loading the model: GET /health answers "
          "200 when it is ready)", file=sys.stderr, flush=True)
    run_server(server, sock)
    if failures:
        raise failures[0]  # main() prints a user error's message, without a traceback
    return 0
