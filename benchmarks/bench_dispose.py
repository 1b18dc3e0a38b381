"""How soon the server sees a stream's connection closed after ``dispose()``, on each transport.

Run: ``.venv/bin/python benchmarks/bench_dispose.py --reps 200``

For each rep and each transport (``HttpTransport``, ``AsyncHttpTransport`` on its own loop, one
transport each for the whole run, so its pool is warm), a call streams from a
loopback stub server (``rxllm.testing.StubServer``, in this process) that holds the response open
after the first text delta; on the first partial the subscription is disposed. The figure is the
time from ``dispose()`` to the moment the *server* observed the client close (``ConnectionRecord
.closed_at``); the table shows p50, p99 and the worst (target: p99 under 2 ms).

The server runs in this process, so that figure also holds the wait for the server's thread to be
scheduled (behind the client's woken reader, under the GIL, on a loaded machine behind other
processes). A second table separates rxllm's own cost: how long ``dispose()`` took to return (the
socket is shut down inside it, so the close is on the wire when it returns) and the CPU time of
the disposing thread (``time.thread_time``), which the machine's load barely moves; and the time
from ``dispose()`` to the ``shutdown`` system call itself (rxllm's socket shutdown, timed by
wrapping ``rxllm._transports.base._shutdown`` in this script: the delay rxllm adds before the
close is on the wire).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import rxllm._transports.base as transport_base
from rxllm import AsyncHttpTransport, Content, HttpTransport, LlmRequest, Part, RetryPolicy
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Hold, StubResponse, StubServer, sse_turn

REQUEST = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("go"),)),))
_shutdowns: list[float] = []  # time.monotonic() of each socket shutdown rxllm made
_shutdown = transport_base._shutdown


def _timed_shutdown(sock: Any) -> None:
    _shutdowns.append(time.monotonic())
    _shutdown(sock)


transport_base._shutdown = _timed_shutdown


def once(server: StubServer, model: OpenAiChatModel, release: threading.Event) -> tuple[float, float, float, float]:
    first = threading.Event()
    subscription = model.generate_content(REQUEST, stream=True).subscribe(lambda _: first.set(), lambda _: None)
    if not first.wait(10):
        raise RuntimeError("no partial within 10 s")
    connection = server.connections[-1]  # a disposed stream's connection is closed: each call opens one
    _shutdowns.clear()
    cpu = time.thread_time()
    disposed_at = time.monotonic()
    subscription.dispose()
    returned = time.monotonic() - disposed_at
    cpu = time.thread_time() - cpu
    if not connection.wait_closed_by_client(5):
        raise RuntimeError("the connection stayed open after dispose")
    if not _shutdowns:
        raise RuntimeError("dispose() shut no socket down")
    return (connection.closed_at or 0.0) - disposed_at, returned, cpu, _shutdowns[0] - disposed_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    release = threading.Event()
    turn = sse_turn("openai-chat", text=["Half ", "an answer"])
    held = StubResponse(body=(*turn[:2], Hold(release, timeout=30.0), *turn[2:]))
    transports: dict[str, Any] = {"HttpTransport": HttpTransport(max_concurrent_streams=4),
                                  "AsyncHttpTransport": AsyncHttpTransport(max_concurrent_streams=4)}
    times: dict[str, list[float]] = {name: [] for name in transports}
    returns: dict[str, list[float]] = {name: [] for name in transports}
    cpus: dict[str, list[float]] = {name: [] for name in transports}
    to_shutdown: dict[str, list[float]] = {name: [] for name in transports}
    with StubServer([held] * (2 * args.reps + 4)) as server:
        models = {name: OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real",
                                        transport=transport, retry_policy=RetryPolicy.never())
                  for name, transport in transports.items()}
        for model in models.values():  # warm-up
            once(server, model, release)
        for _ in range(args.reps):
            for name, model in models.items():
                seen, returned, cpu, shut = once(server, model, release)
                to_shutdown[name].append(shut)
                times[name].append(seen)
                returns[name].append(returned)
                cpus[name].append(cpu)
        release.set()
    for transport in transports.values():
        transport.close()
    for title, table in (("dispose() to the server seeing the close", times),
                         ("dispose() to rxllm's shutdown() of the socket", to_shutdown),
                         ("dispose() returning (the socket already shut down)", returns),
                         ("CPU time of the disposing thread", cpus)):
        print(f"\n{title}, {args.reps} interleaved reps, ms\n")
        print(f"{'transport':<22}{'p50':>8}{'p99':>8}{'worst':>8}")
        print("-" * 46)
        for name, values in table.items():
            ordered = sorted(values)
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
            print(f"{name:<22}{statistics.median(values) * 1e3:>8.3f}{p99 * 1e3:>8.3f}{ordered[-1] * 1e3:>8.3f}")


if __name__ == "__main__":
    main()
