"""`elmo serve`: contextual vectors over HTTP (TEI's routes, OpenAI's `/v1/embeddings`),
concurrent requests batched together in front of one Embedder.

`app.create_app` builds the app, `server` runs it; both need the `serve` extra, so this
package imports neither (the CLI reads `limits` without it)."""
