"""Many concurrent short streams: CPU per stream and time to first token, rxllm against the openai SDK.

Run: ``.venv/bin/python benchmarks/bench_openai_sdk_concurrency.py --streams 200 --chunks 20 --reps 3``
(add ``--streams 1000`` for the larger burst).

One loopback server in its own process (``_server.py``) streams OpenAI chat text; each contender
runs in a child process of its own (so its CPU time is its own) and starts ``--streams`` streams
at once, each of ``--chunks`` chunks, after one warm-up call:

* ``rxllm asyncio``: ``OpenAiChatModel`` on an ``AsyncHttpTransport`` bound to the child's loop;
* ``openai AsyncOpenAI``: ``chat.completions.create(stream=True)``, one task per stream, one loop;
* ``rxllm threads``: ``OpenAiChatModel`` on ``HttpTransport(max_concurrent_streams=streams)``;
* ``openai OpenAI``: the sync client, one thread per stream.

Printed: CPU milliseconds per stream (user + system time of the child during the burst, divided
by the streams) and the time to first token (from the burst's start to each stream's first text),
p50 and p95, with the ratio to the SDK of the same kind (asyncio to ``AsyncOpenAI``, threads to
``OpenAI``; lower is better). Goals: asyncio ≤ 0.8× the SDK's CPU per stream and no worse p95;
threads ≤ 1.0×. With ``--reps``, contenders are interleaved rep by rep and medians shown.

Every contender gets the same timeouts, ``CONNECT_TIMEOUT`` to connect (and to wait for a pooled
connection) and ``READ_TIMEOUT`` between bytes: the SDK's own 5 s connect timeout fails a burst
of 1,000 connections on a loaded 2-core machine (each connect waits behind the others' work on
one loop), which would measure the timeout, not the client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _server import BenchServer

CONTENDERS = ["rxllm asyncio", "openai AsyncOpenAI", "rxllm threads", "openai OpenAI"]
PEER = {"rxllm asyncio": "openai AsyncOpenAI", "rxllm threads": "openai OpenAI"}
MESSAGES = [{"role": "user", "content": "go"}]
CONNECT_TIMEOUT = 60.0
READ_TIMEOUT = 300.0


def _sdk_timeout() -> Any:
    import httpx2  # the openai SDK 3.x's HTTP stack

    return httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT, pool=CONNECT_TIMEOUT)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rxllm_burst(base: str, streams: int, transport: Any) -> list[float]:
    """Start ``streams`` calls at once; each stream's seconds from the burst's start to its first partial."""
    from rxllm import Content, LlmRequest, Part, RetryPolicy
    from rxllm.providers.openai import OpenAiChatModel

    request = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("go")])])
    model = OpenAiChatModel("bench", base_url=base, api_key="sk-bench", transport=transport,
                            retry_policy=RetryPolicy.never())
    lock = threading.Lock()
    done = threading.Event()
    firsts: list[float] = []
    errors: list[Exception] = []
    left = [streams]

    def stream(started: float) -> None:
        seen = [False]

        def on_next(_: Any) -> None:
            if not seen[0]:
                seen[0] = True
                elapsed = time.perf_counter() - started
                with lock:
                    firsts.append(elapsed)

        def end(error: Exception | None = None) -> None:
            with lock:
                if error is not None:
                    errors.append(error)
                left[0] -= 1
                if left[0] == 0:
                    done.set()

        model.generate_content(request, stream=True).subscribe(on_next, end, end)

    started = time.perf_counter()
    for _ in range(streams):
        stream(started)
    if not done.wait(600):
        raise TimeoutError("the burst did not end within 600 s")
    if errors:
        raise errors[0]
    return firsts


def run_rxllm_threads(base: str, streams: int) -> tuple[list[float], float]:
    from rxllm import HttpTransport

    transport = HttpTransport(max_concurrent_streams=streams, connect_timeout=CONNECT_TIMEOUT,
                              read_timeout=READ_TIMEOUT)
    rxllm_burst(base, 1, transport)  # warm-up
    cpu = _cpu()
    firsts = rxllm_burst(base, streams, transport)
    cpu = _cpu() - cpu
    transport.close()
    return firsts, cpu


def run_rxllm_asyncio(base: str, streams: int) -> tuple[list[float], float]:
    from rxllm import AsyncHttpTransport

    async def main() -> tuple[list[float], float]:
        transport = AsyncHttpTransport(max_concurrent_streams=streams, loop=asyncio.get_running_loop(),
                                       connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT)
        burst = asyncio.to_thread  # the burst waits on an event: off the loop, which runs the streams
        await burst(rxllm_burst, base, 1, transport)
        cpu = _cpu()
        firsts = await burst(rxllm_burst, base, streams, transport)
        cpu = _cpu() - cpu
        await transport.aclose()
        return firsts, cpu

    return asyncio.run(main())


def run_openai_async(base: str, streams: int) -> tuple[list[float], float]:
    import openai

    async def one(client: Any, started: float) -> float:
        first = 0.0
        stream = await client.chat.completions.create(model="bench", messages=MESSAGES, stream=True)
        async for chunk in stream:
            if not first and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        return first

    async def main() -> tuple[list[float], float]:
        client = openai.AsyncOpenAI(api_key="sk-bench", base_url=base, max_retries=0, timeout=_sdk_timeout())
        await one(client, time.perf_counter())
        cpu = _cpu()
        started = time.perf_counter()
        firsts = await asyncio.gather(*(one(client, started) for _ in range(streams)))
        cpu = _cpu() - cpu
        await client.close()
        return list(firsts), cpu

    return asyncio.run(main())


def run_openai_threads(base: str, streams: int) -> tuple[list[float], float]:
    import openai

    client = openai.OpenAI(api_key="sk-bench", base_url=base, max_retries=0, timeout=_sdk_timeout())
    firsts: list[float] = []
    lock = threading.Lock()

    def one(started: float) -> None:
        first = 0.0
        for chunk in client.chat.completions.create(model="bench", messages=MESSAGES, stream=True):
            if not first and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        with lock:
            firsts.append(first)

    one(time.perf_counter())
    firsts.clear()
    cpu = _cpu()
    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(started,)) for _ in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = _cpu() - cpu
    client.close()
    return firsts, cpu


RUNNERS = {
    "rxllm asyncio": run_rxllm_asyncio,
    "openai AsyncOpenAI": run_openai_async,
    "rxllm threads": run_rxllm_threads,
    "openai OpenAI": run_openai_threads,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--contender", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="write the results here as JSON")
    args = parser.parse_args()
    if args.contender:  # child process: one contender, one JSON line
        firsts, cpu = RUNNERS[args.contender](f"{args.url}/text/{args.chunks}", args.streams)
        print(json.dumps({"cpu_ms_per_stream": cpu * 1000 / args.streams,
                          "ttft_p50_ms": _quantile(firsts, 0.5) * 1000,
                          "ttft_p95_ms": _quantile(firsts, 0.95) * 1000}))
        return 0

    results: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
    with BenchServer() as server:
        for _ in range(args.reps):
            for name in CONTENDERS:
                out = subprocess.run(
                    [sys.executable, __file__, "--contender", name, "--url", server.url,
                     "--streams", str(args.streams), "--chunks", str(args.chunks)],
                    capture_output=True, text=True, timeout=900,
                )
                if out.returncode != 0:
                    raise RuntimeError(f"{name} failed:\n{out.stderr}")
                results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    medians = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
               for name, runs in results.items()}
    print(f"\n{args.streams} concurrent streams × {args.chunks} chunks, {args.reps} interleaved reps, medians; "
          f"ratios to the openai SDK of the same kind (lower is better)\n")
    header = f"{'contender':<20}{'CPU ms/stream':>14}{'vs SDK':>8}{'TTFT p50 ms':>13}{'TTFT p95 ms':>13}{'vs SDK':>8}"
    print(header)
    print("-" * len(header))
    for name in CONTENDERS:
        row = medians[name]
        peer = medians.get(PEER.get(name, name), row)
        cpu, p50, p95 = row["cpu_ms_per_stream"], row["ttft_p50_ms"], row["ttft_p95_ms"]
        cpu_ratio, p95_ratio = cpu / peer["cpu_ms_per_stream"], p95 / peer["ttft_p95_ms"]
        print(f"{name:<20}{cpu:>14.3f}{cpu_ratio:>7.2f}×{p50:>13.2f}{p95:>13.2f}{p95_ratio:>7.2f}×")
    if args.json is not None:
        args.json.write_text(json.dumps({"streams": args.streams, "chunks": args.chunks, "medians": medians}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
