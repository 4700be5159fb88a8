"""ServeLimits: what one request, and all of them together, may ask of the service."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def _limit(default: int, protects: str) -> int:
    return field(default=default, metadata={"help": protects})


@dataclass(frozen=True)
class ServeLimits:
    """The limits of `elmo serve`; each field's metadata says what it protects (the CLI's
    help for --max-batch-tokens and the others)."""

    max_batch_tokens: int = _limit(
        4096, "positions (tokens + 2 boundaries per input) embedded in one model call; "
        "bounds the memory and the time of one batch")
    max_client_batch_size: int = _limit(32, "inputs in one request; more: 413")
    max_input_tokens: int = _limit(
        1024, "tokens in one input; more: 413. At most --max-batch-tokens - 2")
    max_concurrent_requests: int = _limit(
        512, "requests waiting or being embedded at once (more: 429, so that clients retry "
        "elsewhere instead of queueing without end)")
    payload_limit: int = _limit(2_000_000, "bytes in one request body; more: 413")
    body_timeout: int = _limit(
        30, "seconds a request's body may take to arrive once the server reads it; slower "
        "(a client that sends half a body and stalls): 408 and the connection closed")
    max_connections: int = _limit(
        1024, "connections open at once, idle ones included; a request on one more: 503 "
        "(plain text, from uvicorn) and that connection closed")

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.max_input_tokens + 2 > self.max_batch_tokens:
            raise ValueError(
                f"--max-input-tokens {self.max_input_tokens} plus the two sentence boundaries "
                f"must fit in --max-batch-tokens {self.max_batch_tokens}: raise "
                "--max-batch-tokens or lower --max-input-tokens")
