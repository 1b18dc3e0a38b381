"""Partial-object streaming against text streaming, on the same stream: µs per chunk.

Run: ``.venv/bin/python benchmarks/bench_structured.py --chunks 2000 --reps 5``.

One structured reply (a JSON object holding a list of items, split into ``--chunks`` SSE events)
is served by a loopback stub server; each rep streams it twice through
``OpenAiChatModel.generate_content(stream=True)``, interleaved:

* ``text``: no ``response_schema``: partials carry only their text (the plain path);
* ``structured``: ``response_schema=Catalog``: every partial also gets ``parsed`` (the text so far
  parsed leniently) and the final the validated ``Catalog``.

Two more rows time the same chunks with no I/O at all: ``text, no I/O`` runs the
:class:`rxllm.StreamAggregator` alone, ``structured, no I/O`` adds :class:`rxllm.StructuredStream`
(the schema path's own cost, free of the loopback server's noise). Re-parsing the text so far
makes that cost grow with the reply (O(text) per chunk), so ``--chunks`` changes the per-chunk
figure; the table prints the reply's size next to it. Medians; figures written as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from pydantic import BaseModel
from reactivex import operators as ops

from rxllm import (
    Chunk,
    Content,
    GenerateContentConfig,
    LlmRequest,
    Part,
    RetryPolicy,
    StreamAggregator,
    StructuredStream,
)
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer, sse_turn


class Item(BaseModel):
    sku: str
    name: str
    qty: int


class Catalog(BaseModel):
    items: list[Item]


def reply_pieces(chunks: int) -> list[str]:
    """A structured reply split into ``chunks`` pieces of about the same size."""
    items = [{"sku": f"sku-{i:05d}", "name": f"item number {i}", "qty": i % 7} for i in range(max(1, chunks // 6))]
    text = json.dumps({"items": items})
    size = max(1, len(text) // chunks)
    return [text[i:i + size] for i in range(0, len(text), size)]


def run_once(model: OpenAiChatModel, request: LlmRequest) -> tuple[float, int]:
    started = time.perf_counter()
    responses = model.generate_content(request, stream=True).pipe(ops.to_list()).run()
    elapsed = time.perf_counter() - started
    return elapsed, len(responses) - 1


def no_io(pieces: list[str], structured: bool) -> float:
    chunks = [Chunk(text_delta=piece) for piece in pieces]
    started = time.perf_counter()
    aggregator = StreamAggregator()
    if structured:
        stream = StructuredStream(Catalog)
        for chunk in chunks:
            for partial in aggregator.accept(chunk):
                stream.apply(partial)
        final = stream.apply(aggregator.finish())
        assert isinstance(final.parsed, Catalog)
    else:
        for chunk in chunks:
            aggregator.accept(chunk)
        aggregator.finish()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)

    pieces = reply_pieces(args.chunks)
    body = sse_turn("openai-chat", text=pieces)
    question = [Content(role="user", parts=[Part.from_text("the catalog")])]
    text_request = LlmRequest(contents=question)
    structured_request = LlmRequest(contents=question, config=GenerateContentConfig(response_schema=Catalog))
    times: dict[str, list[float]] = {"text": [], "structured": [], "text, no I/O": [], "structured, no I/O": []}
    with StubServer(responder=lambda _: StubResponse(body=body)) as server:
        model = OpenAiChatModel("bench", base_url=server.url + "/v1", api_key="sk-bench",
                                retry_policy=RetryPolicy.never())
        run_once(model, text_request)  # warm-up: connection, imports
        pair = [("text", text_request), ("structured", structured_request)]
        for rep in range(args.reps):
            for name, request in pair if rep % 2 == 0 else pair[::-1]:  # alternate who goes first
                elapsed, partials = run_once(model, request)
                assert partials == len(pieces), (partials, len(pieces))
                times[name].append(elapsed / len(pieces) * 1e6)
            for name, structured in (("text, no I/O", False), ("structured, no I/O", True)):
                times[name].append(no_io(pieces, structured) / len(pieces) * 1e6)

    reply_kb = sum(len(p) for p in pieces) / 1024
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{len(pieces)} chunks, reply {reply_kb:.1f} KiB, {args.reps} reps (medians)")
    print(f"{'path':<20} {'µs/chunk':>9} {'vs text':>8}")
    for name, value in medians.items():
        base = medians["text, no I/O" if name.endswith("no I/O") else "text"]
        print(f"{name:<20} {value:>9.1f} {value / base:>7.2f}×")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"chunks": len(pieces), "reply_kib": reply_kb, "us_per_chunk": medians},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
