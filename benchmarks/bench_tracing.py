"""Per-chunk CPU cost of rxllm's tracing: the same stream decoded, parsed and aggregated with and without
a live model-call span (OpenTelemetry SDK tracer provider), no network.

Run: ``.venv/bin/python benchmarks/bench_tracing.py --chunks 100000 --reps 15``

Spans are per call, never per chunk: the only per-chunk difference when traced is one flag check
(has the first chunk arrived?). CPU time (``time.process_time``) of the exact per-chunk path the
threaded transport runs (``drive_sse`` → parser → aggregator → a subscriber), minimum over
alternating reps, so other processes on the machine barely move it. The end-to-end figure over a
loopback server is ``bench_stream.py --tracing``. Target: under 3 % apart.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

from opentelemetry.sdk.trace import TracerProvider

import rxllm
from rxllm import LlmRequest, LlmResponse
from rxllm._models.aggregation import StreamAggregator
from rxllm._models.drive import drive_sse
from rxllm._models.sse_chat_model import _emit_partials, _on_chunk
from rxllm._telemetry.otel import AttemptTelemetry, model_call
from rxllm.providers._openai_chat import OpenAiChatChunkParser
from rxllm.testing import sse_turn

READ = 65536  # bytes per network read, as httpx hands them over


def one_stream(reads: list[bytes], chunks: int, traced: AttemptTelemetry | None) -> float:
    """µs of CPU per chunk for one whole stream (partials delivered to a subscriber, final built)."""
    aggregator = StreamAggregator(provider="openai")
    received: list[LlmResponse] = []
    subscriber = SimpleNamespace(on_next=received.append)  # _on_chunk takes the subscriber's observer
    on_chunk = _on_chunk(_emit_partials, aggregator, subscriber, traced)  # type: ignore[arg-type]
    started = time.process_time()
    drive_sse(reads, OpenAiChatChunkParser(), on_chunk)
    aggregator.finish()
    return (time.process_time() - started) / chunks * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()

    body = b"".join(sse_turn("openai-chat", text=["tok"] * args.chunks))
    reads = [body[i : i + READ] for i in range(0, len(body), READ)]
    rxllm.configure_telemetry(tracer_provider=TracerProvider())
    off: list[float] = []
    on: list[float] = []
    try:
        for rep in range(args.reps):
            call = model_call(provider="openai", model="bench", request=LlmRequest(), stream=True)
            assert call is not None, "OpenTelemetry is not installed"
            attempt = call.attempt()
            attempt.start("http://127.0.0.1:8000/v1/chat/completions")
            if rep % 2:
                off.append(one_stream(reads, args.chunks, None))
                on.append(one_stream(reads, args.chunks, attempt))
            else:
                on.append(one_stream(reads, args.chunks, attempt))
                off.append(one_stream(reads, args.chunks, None))
            attempt.end()
    finally:
        rxllm.configure_telemetry()
    difference = (min(on) / min(off) - 1) * 100
    print(f"{args.chunks} chunks, {args.reps} alternating reps, CPU µs per chunk (minimum):")
    print(f"  untraced  {min(off):7.3f}")
    print(f"  traced    {min(on):7.3f}")
    print(f"tracing on vs off: {difference:+.2f} % per chunk (target: under 3 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
