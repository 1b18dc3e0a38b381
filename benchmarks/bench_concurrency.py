"""Many concurrent streams: aggregate chunks/s, peak threads and peak RSS, rxllm against plain httpx2.

Run: ``make bench-concurrency`` (or ``.venv/bin/python benchmarks/bench_concurrency.py --streams 1000 --chunks 2000``).

Four contenders, each in its own child process (so peak RSS is its own), in one run, interleaved
when ``--reps`` > 1, against the same loopback server process (``_server.py``):

* ``httpx2 threads``: a thread per stream, httpx2 ``iter_lines`` + ``json.loads`` + join (baseline);
* ``rxllm threads``: ``OpenAiChatModel`` on ``HttpTransport(max_concurrent_streams=streams)``;
* ``httpx2 asyncio``: a task per stream on one loop, ``httpx2.AsyncClient`` ``aiter_lines`` (baseline);
* ``rxllm asyncio``: ``OpenAiChatModel`` on ``AsyncHttpTransport``.

Then the open-stream capacity of the asyncio transport: ``--open`` streams (default 10,000) held
open at once, each having delivered its first partial; memory per open stream is the RSS growth
divided by the count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import BenchServer

from rxllm import AsyncHttpTransport, Content, HttpTransport, LlmRequest, LlmResponse, Part, RetryPolicy
from rxllm.providers.openai import OpenAiChatModel

REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("go")])])
CONTENDERS = ["httpx2 threads", "rxllm threads", "httpx2 asyncio", "rxllm asyncio"]


class PeakThreads:
    """Samples ``threading.active_count()`` every 5 ms."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, threading.active_count())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak - 1  # not counting the sampler itself


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def httpx_threads(url: str, streams: int, chunks: int) -> int:
    limits = httpx2.Limits(max_connections=streams, max_keepalive_connections=streams)
    client = httpx2.Client(timeout=120, limits=limits)
    total = [0]
    lock = threading.Lock()

    def one() -> None:
        pieces = []
        with client.stream("POST", f"{url}/text/{chunks}/chat/completions", json={"stream": True}) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    choices = json.loads(line[6:])["choices"]
                    if choices and choices[0]["delta"].get("content"):
                        pieces.append(choices[0]["delta"]["content"])
        with lock:
            total[0] += len(pieces)

    threads = [threading.Thread(target=one) for _ in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    return total[0]


def httpx_asyncio(url: str, streams: int, chunks: int) -> int:
    async def main() -> int:
        limits = httpx2.Limits(max_connections=streams, max_keepalive_connections=streams)
        async with httpx2.AsyncClient(timeout=120, limits=limits) as client:

            async def one() -> int:
                pieces = []
                async with client.stream("POST", f"{url}/text/{chunks}/chat/completions", json={"stream": True}) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            choices = json.loads(line[6:])["choices"]
                            if choices and choices[0]["delta"].get("content"):
                                pieces.append(choices[0]["delta"]["content"])
                return len(pieces)

            return sum(await asyncio.gather(*(one() for _ in range(streams))))

    return asyncio.run(main())


def rxllm_run(url: str, streams: int, chunks: int, transport: HttpTransport | AsyncHttpTransport) -> int:
    model = OpenAiChatModel(
        "bench", base_url=f"{url}/text/{chunks}", transport=transport, retry_policy=RetryPolicy.never()
    )
    remaining = [streams]
    partials = [0]
    lock = threading.Lock()
    done = threading.Event()
    errors: list[Exception] = []

    def finished() -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()

    def on_next(response: LlmResponse) -> None:
        if response.partial:
            partials[0] += 1  # one thread at a time per stream; the GIL makes += on an int safe enough here

    def on_error(error: Exception) -> None:
        errors.append(error)
        finished()

    for _ in range(streams):
        model.generate_content(REQUEST, stream=True).subscribe(on_next, on_error, finished)
    done.wait(600)
    transport.close()
    if errors:
        raise errors[0]
    return partials[0]


def run_contender(name: str, url: str, streams: int, chunks: int) -> dict[str, Any]:
    sampler = PeakThreads()
    started = time.perf_counter()
    if name == "httpx2 threads":
        count = httpx_threads(url, streams, chunks)
    elif name == "httpx2 asyncio":
        count = httpx_asyncio(url, streams, chunks)
    elif name == "rxllm threads":
        count = rxllm_run(url, streams, chunks, HttpTransport(max_concurrent_streams=streams))
    else:
        count = rxllm_run(url, streams, chunks, AsyncHttpTransport(max_concurrent_streams=streams))
    elapsed = time.perf_counter() - started
    return {
        "contender": name,
        "seconds": elapsed,
        "chunks": count,
        "chunks_per_s": count / elapsed,
        "peak_threads": sampler.stop(),
        "peak_rss_mib": _rss_mib(),
    }


def open_streams(url: str, count: int) -> dict[str, Any]:
    """Hold ``count`` streams open at once on the asyncio transport; report memory per open stream."""
    # 10,000 connects at once keep the loop busy for seconds: on a loaded machine the default 10 s
    # connect_timeout fired before the loop got back to the connects (thousands of ConnectTimeouts).
    transport = AsyncHttpTransport(max_concurrent_streams=count, read_timeout=600, connect_timeout=300)
    model = OpenAiChatModel("bench", base_url=f"{url}/hold/1", transport=transport, retry_policy=RetryPolicy.never())
    before = _current_rss_mib()
    opened = [0]
    all_open = threading.Event()
    lock = threading.Lock()
    errors: list[Exception] = []

    def on_next(_: LlmResponse) -> None:
        with lock:
            opened[0] += 1
            if opened[0] == count:
                all_open.set()

    sampler = PeakThreads()
    started = time.perf_counter()
    subscriptions = [
        model.generate_content(REQUEST, stream=True).subscribe(on_next, errors.append) for _ in range(count)
    ]
    ok = all_open.wait(300)
    elapsed = time.perf_counter() - started
    during = _current_rss_mib()
    for subscription in subscriptions:
        subscription.dispose()
    transport.close()
    return {
        "open_streams": opened[0],
        "all_open": ok,
        "errors": len(errors),
        "first_error": repr(errors[0]) if errors else None,
        "seconds_to_open": elapsed,
        "rss_growth_mib": during - before,
        "kib_per_open_stream": (during - before) * 1024 / max(opened[0], 1),
        "peak_threads": sampler.stop(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--open", type=int, default=10_000, help="streams held open at once (asyncio transport)")
    parser.add_argument("--contender", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_concurrency.json"
    )
    args = parser.parse_args()
    if args.contender:  # child process: one contender, one JSON line
        result = (
            open_streams(args.url, args.open)
            if args.contender == "open"
            else run_contender(args.contender, args.url, args.streams, args.chunks)
        )
        print(json.dumps(result))
        return 0

    def child(contender: str) -> dict[str, Any]:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--contender",
                contender,
                "--url",
                server.url,
                "--streams",
                str(args.streams),
                "--chunks",
                str(args.chunks),
                "--open",
                str(args.open),
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    results: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
    with BenchServer() as server:
        for _ in range(args.reps):
            for name in CONTENDERS:
                results[name].append(child(name))
        capacity = child("open") if args.open else None

    print(f"\n{args.streams} concurrent streams × {args.chunks} chunks, {args.reps} rep(s); best rep shown\n")
    header = f"{'contender':16} {'chunks/s':>10} {'vs baseline':>12} {'peak threads':>13} {'peak RSS MiB':>13}"
    print(header)
    print("-" * len(header))
    best = {name: max(rows, key=lambda r: r["chunks_per_s"]) for name, rows in results.items()}
    for name in CONTENDERS:
        row = best[name]
        baseline = best["httpx2 threads" if "threads" in name else "httpx2 asyncio"]
        ratio = baseline["chunks_per_s"] / row["chunks_per_s"]
        print(
            f"{name:16} {row['chunks_per_s']:>10.0f} {ratio:>11.2f}× {row['peak_threads']:>13} "
            f"{row['peak_rss_mib']:>13.0f}"
        )
    print("(vs baseline: the matching plain-httpx2 baseline's throughput divided by this one's; lower is better)")
    if capacity:
        print(
            f"\nasyncio transport, {capacity['open_streams']} streams open at once "
            f"({'all' if capacity['all_open'] else 'NOT all'} delivered a partial) "
            f"in {capacity['seconds_to_open']:.1f} s: "
            f"+{capacity['rss_growth_mib']:.0f} MiB RSS, {capacity['kib_per_open_stream']:.1f} KiB per open stream, "
            f"peak threads {capacity['peak_threads']}"
        )
        if capacity["errors"]:
            print(f"  {capacity['errors']} streams failed, the first with {capacity['first_error']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"streams": args.streams, "chunks": args.chunks, "results": results, "open_capacity": capacity}, indent=2
        )
    )
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
