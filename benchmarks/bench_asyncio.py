"""Awaited from asyncio: what ``await model.generate_content(...)`` adds to a streamed call.

Run: ``.venv/bin/python benchmarks/bench_asyncio.py`` (``--calls 200 --chunks 50 --reps 3``).

From one ``asyncio.run``, ``--calls`` sequential streamed calls per contender, interleaved call by
call (so the machine's state affects all alike), against the same loopback server process
(``_server.py``), every stream ``--chunks`` OpenAI chat chunks:

* ``httpx.AsyncClient`` (the floor): ``aiter_lines`` + ``json.loads`` + join, on the same loop;
* ``rxllm await, threads``: ``await model.generate_content(request, stream=True)`` on
  ``HttpTransport`` (the stream is read on an I/O thread, the final handed to the loop);
* ``rxllm await, asyncio``: the same on ``AsyncHttpTransport`` (read on its own loop thread);
* ``rxllm async for, threads`` / ``asyncio``: ``async for`` over every partial, then the final;
* ``openai.AsyncOpenAI`` (a peer, when the ``openai`` package is installed): ``create(stream=True)``,
  the text accumulated by hand.

The table shows the median and p90 milliseconds per call, the **added latency** (median minus
the floor's median; the target for rxllm is < 1 ms) and the ratio to the floor. Every contender
keeps its connection alive between calls, as a service would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import BenchServer

from rxllm import AsyncHttpTransport, Content, HttpTransport, LlmRequest, Part, RetryPolicy
from rxllm.providers.openai import OpenAiChatModel

Call = Callable[[], Awaitable[str]]
REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("hi")])])


def floor_call(client: httpx.AsyncClient, url: str) -> Call:
    async def call() -> str:
        pieces = []
        async with client.stream("POST", url, json={"model": "bench", "stream": True}) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    for choice in json.loads(line[6:])["choices"]:
                        pieces.append(choice["delta"].get("content") or "")
        return "".join(pieces)

    return call


def rxllm_await(model: OpenAiChatModel) -> Call:
    async def call() -> str:
        final = await model.generate_content(REQUEST, stream=True)
        return final.text() or ""

    return call


def rxllm_iterate(model: OpenAiChatModel) -> Call:
    async def call() -> str:
        text = ""
        async for response in model.generate_content(REQUEST, stream=True):
            if not response.partial:
                text = response.text() or ""
        return text

    return call


def openai_call(client: Any) -> Call:
    async def call() -> str:
        pieces = []
        stream = await client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "hi"}],
                                                      stream=True)
        async for chunk in stream:
            for choice in chunk.choices:
                pieces.append(choice.delta.content or "")
        return "".join(pieces)

    return call


async def measure(contenders: dict[str, Call], calls: int, expected: str) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {name: [] for name in contenders}
    for name, call in contenders.items():  # warm-up: connections open, code paths hot
        text = await call()
        assert text == expected, f"{name} returned {text[:40]!r}..."
    for _ in range(calls):
        for name, call in contenders.items():
            start = time.perf_counter()
            await call()
            timings[name].append(time.perf_counter() - start)
    return timings


async def run(url: str, calls: int, chunks: int) -> dict[str, list[float]]:
    base = f"{url}/text/{chunks}"
    threads = HttpTransport(max_concurrent_streams=4)
    loop_transport = AsyncHttpTransport(max_concurrent_streams=4)
    options: dict[str, Any] = {"api_key": "sk-bench", "retry_policy": RetryPolicy.never()}
    on_threads = OpenAiChatModel("bench", base_url=base, transport=threads, **options)
    on_loop = OpenAiChatModel("bench", base_url=base, transport=loop_transport, **options)
    client = httpx.AsyncClient(timeout=30)
    contenders: dict[str, Call] = {
        "httpx.AsyncClient (floor)": floor_call(client, f"{base}/chat/completions"),
        "rxllm await, threads": rxllm_await(on_threads),
        "rxllm await, asyncio": rxllm_await(on_loop),
        "rxllm async for, threads": rxllm_iterate(on_threads),
        "rxllm async for, asyncio": rxllm_iterate(on_loop),
    }
    peer = None
    try:
        import openai

        peer = openai.AsyncOpenAI(api_key="sk-bench", base_url=base, max_retries=0)
        contenders["openai.AsyncOpenAI (peer)"] = openai_call(peer)
    except ImportError:
        print("(openai not installed: the peer row is left out)")
    expected = "".join(f"tok{i % 10} " for i in range(chunks))
    try:
        return await measure(contenders, calls, expected)
    finally:
        await client.aclose()
        if peer is not None:
            await peer.close()
        threads.close()
        loop_transport.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per contender (default 200)")
    parser.add_argument("--chunks", type=int, default=50, help="chunks per stream (default 50)")
    parser.add_argument("--reps", type=int, default=1, help="repetitions; the medians are pooled (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    timings: dict[str, list[float]] = {}
    with BenchServer() as server:
        for _ in range(args.reps):
            for name, values in asyncio.run(run(server.url, args.calls, args.chunks)).items():
                timings.setdefault(name, []).extend(values)

    floor = statistics.median(timings["httpx.AsyncClient (floor)"])
    rows = []
    print(f"\n{args.calls} sequential awaited streamed calls x {args.reps} rep(s), {args.chunks} chunks each, "
          "loopback; ms per call")
    print(f"{'contender':<28} {'median':>8} {'p90':>8} {'added':>8} {'vs floor':>9}")
    for name, values in timings.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) >= 10 else max(values)
        added = median - floor
        rows.append({"contender": name, "median_ms": median * 1e3, "p90_ms": p90 * 1e3, "added_ms": added * 1e3,
                     "ratio": median / floor})
        print(f"{name:<28} {median * 1e3:8.3f} {p90 * 1e3:8.3f} {added * 1e3:+8.3f} {median / floor:8.2f}x")
    worst = max(row["added_ms"] for row in rows if row["contender"].startswith("rxllm await"))
    print(f"\nrxllm await: added latency {worst:.3f} ms per call at the median (target < 1 ms): "
          f"{'OK' if worst < 1.0 else 'ABOVE TARGET'}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"calls": args.calls, "chunks": args.chunks, "reps": args.reps,
                                         "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
