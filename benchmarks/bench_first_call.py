"""The first call on a fresh transport against the next call on the same one: construction + first delta.

Run: ``.venv/bin/python benchmarks/bench_first_call.py --reps 20`` (plain HTTP on loopback, the
server in its own process, see ``_server.py``).

For each rep and each transport (``HttpTransport``, ``AsyncHttpTransport`` on its own loop), a fresh
transport and model are built, then two calls are made one after the other, each timed from the
subscription to its first partial: ``fresh`` also includes building the transport and the model
(what a process's first call pays), ``warm`` is the second call on the same transport (a kept-alive
connection). The table shows the medians, in milliseconds, and the difference (goal: within 3 ms).
One call per transport kind runs first and is not counted: it pays the imports, and the process's
one-time trust-store load (rxllm's clients share one SSL context per process).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from _server import BenchServer

from rxllm import AsyncHttpTransport, Content, HttpTransport, LlmRequest, Part, RetryPolicy
from rxllm.providers.openai import OpenAiChatModel

REQUEST = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("hi"),)),))


def first_delta(model: OpenAiChatModel, started: float) -> float:
    """Seconds from ``started`` to the first partial of one streamed call (the call runs to its end)."""
    first: list[float] = []
    done = threading.Event()

    def on_next(_: Any) -> None:
        if not first:
            first.append(time.perf_counter())

    def on_error(error: Exception) -> None:
        done.set()
        raise error

    model.generate_content(REQUEST, stream=True).subscribe(on_next, on_error, done.set)
    if not done.wait(30):
        raise TimeoutError("no answer within 30 s")
    return first[0] - started


def once(make: Callable[[], Any], url: str) -> tuple[float, float]:
    started = time.perf_counter()
    transport = make()
    model = OpenAiChatModel("bench", base_url=url, api_key="sk-bench", transport=transport,
                            retry_policy=RetryPolicy.never())
    fresh = first_delta(model, started)
    warm = first_delta(model, time.perf_counter())
    transport.close()
    return fresh, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20)
    args = parser.parse_args()
    kinds: dict[str, Callable[[], Any]] = {
        "HttpTransport": lambda: HttpTransport(max_concurrent_streams=4),
        "AsyncHttpTransport": lambda: AsyncHttpTransport(max_concurrent_streams=4),
    }
    with BenchServer() as server:
        url = f"{server.url}/text/{args.chunks}"
        for make in kinds.values():  # one call each first, so module-level imports are not counted
            once(make, url)
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in kinds}
        for _ in range(args.reps):
            for name, make in kinds.items():
                fresh, warm = once(make, url)
                times[name][0].append(fresh)
                times[name][1].append(warm)
    print(f"\nfirst delta, plain HTTP on loopback, {args.chunks}-chunk streams, {args.reps} interleaved reps, "
          "medians\n")
    print(f"{'transport':<22}{'fresh ms':>10}{'warm ms':>10}{'difference':>12}")
    print("-" * 54)
    for name, (fresh, warm) in times.items():
        f, w = statistics.median(fresh) * 1000, statistics.median(warm) * 1000
        print(f"{name:<22}{f:>10.2f}{w:>10.2f}{f - w:>+12.2f}")


if __name__ == "__main__":
    main()
