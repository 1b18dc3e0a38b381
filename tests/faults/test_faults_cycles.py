"""Subscribe/dispose cycles at random moments: no leaked threads, sockets or fds; nothing emitted after dispose.

2,500 cycles on the threaded transport, 1,500 on the asyncio one (every phase hundreds of times).

Each cycle picks a moment at random (seeded): dispose right after subscribing (the request may
not even have started), while the server holds the response headers, in the middle of the body
(after the first partial, while the server holds the rest), or not at all (the turn completes).
Every emission is stamped with a process-wide sequence number; a stamp taken after ``dispose()``
returned must be greater than every stamp of that subscription.
At the end the transport, the server and the I/O pool are closed and the process must be back
to its baseline threads and file descriptors.

A ``spin`` cycle disposes after a random number of ``sched_yield`` calls (each lets the I/O
thread run), so the dispose
lands anywhere from "still queued" through "connecting" to "streaming"; it may even come after
the turn completed, which is fine: then nothing at all may follow the terminal event.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from typing import Any

import pytest
from faults_support import (
    REQUEST,
    TIMEOUT,
    TRANSPORT_KINDS,
    CountingPool,
    Recorder,
    loop_idle,
    make_transport,
    open_fds,
)
from wire import OPENAI

from rxllm import AsyncHttpTransport, RetryPolicy
from rxllm.testing import Hold, RecordedRequest, StubResponse, StubServer

SEED = 0xD15_905E
CYCLES = {"threads": 2_500, "asyncio": 1_500}  # seeded moments across all five phases, within the suite's time budget
PHASES = ("immediate", "spin", "headers", "mid_body", "complete")
WEIGHTS = (25, 25, 15, 20, 15)
SPIN = 400  # up to this many GIL-releasing yields: the request is then anywhere from queued to streaming
STREAMS = 8


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_many_subscribe_dispose_cycles_leak_nothing_and_emit_nothing_after_dispose(kind: str) -> None:
    baseline_threads = threading.active_count()
    baseline_fds = open_fds()
    rng = random.Random(SEED)
    release = threading.Event()  # never set while cycling: held responses wait for the client to go
    stream = OPENAI.stream("a", "b", "c")
    responses = {
        "headers": StubResponse(before_headers=[Hold(release, timeout=TIMEOUT)], body=stream),
        "mid_body": StubResponse(body=[*stream[:2], Hold(release, timeout=TIMEOUT), *stream[2:]]),
        "complete": StubResponse(body=stream),
    }

    rng_server = random.Random(SEED + 1)
    arrived = threading.Condition()
    seen: Counter[str] = Counter()
    last_connection: dict[str, int] = {}

    def responder(request: RecordedRequest) -> StubResponse:
        phase = request.path.split("/")[1]
        with arrived:
            seen[phase] += 1
            last_connection[phase] = request.connection_id
            arrived.notify_all()
            return responses.get(phase) or responses[rng_server.choice(("headers", "mid_body", "complete"))]

    server = StubServer(responder=responder).start()
    transport = make_transport(kind, streams=STREAMS)
    pool = CountingPool(STREAMS) if kind == "threads" else None
    options: dict[str, Any] = {"scheduler": pool} if pool is not None else {}

    def idle() -> bool:
        """No request work is left running: no blocked I/O thread, no pending task."""
        if pool is not None:
            return pool.wait_idle(TIMEOUT)
        assert isinstance(transport, AsyncHttpTransport)
        return loop_idle(transport)

    models = {
        phase: OPENAI.make(f"{server.url}/{phase}", transport=transport, retry_policy=RetryPolicy.never(), **options)
        for phase in PHASES
    }
    counts: Counter[str] = Counter()
    spin_outcomes: Counter[str] = Counter()
    peak_threads = 0
    started = time.monotonic()
    try:
        for cycle in range(CYCLES[kind]):
            phase = rng.choices(PHASES, WEIGHTS)[0]
            counts[phase] += 1
            where = f"cycle {cycle} ({phase}, seed {SEED:#x})"
            recorder = Recorder(notify_after=1)
            with arrived:
                requests_before = seen[phase]
            subscription = recorder.subscribe(models[phase].generate_content(REQUEST, stream=True))
            if phase == "complete":
                recorder.wait(where)
                assert recorder.completed and not recorder.errors, f"{where}: {recorder.errors!r}"
                assert recorder.items[-1].text() == "abc", where
                subscription.dispose()
                continue
            if phase == "headers":
                with arrived:
                    arrived_in_time = arrived.wait_for(lambda n=requests_before: seen["headers"] > n, TIMEOUT)
                assert arrived_in_time, f"{where}: no request"
            elif phase == "mid_body":
                assert recorder.reached.wait(TIMEOUT), f"{where}: no first partial"
            elif phase == "spin":  # a random moment, not a synchronisation: nothing waits on it
                for _ in range(rng.randrange(SPIN)):
                    os.sched_yield()  # releases the GIL, so the I/O thread makes progress meanwhile
            subscription.dispose()
            disposed_at = Recorder.next_stamp()
            emitted = len(recorder.items)
            if phase in ("headers", "mid_body"):
                assert not recorder.done.is_set(), f"{where}: a terminal event before dispose: {recorder.errors!r}"
            if phase == "spin":
                spin_outcomes["done" if recorder.done.is_set() else "partials" if emitted else "nothing"] += 1
            late = [s for s in recorder.stamps if s > disposed_at]
            assert not late, f"{where}: {len(late)} item(s) emitted after dispose"
            if cycle % 500 == 0:  # now and then, prove the server saw the close and the I/O thread is free
                if phase in ("headers", "mid_body"):
                    with arrived:
                        connection = server.connections[last_connection[phase] - 1]
                    assert connection.wait_closed_by_client(TIMEOUT), f"{where}: the server never saw the close"
                assert idle(), f"{where}: an I/O thread or task stayed blocked"
                assert len(recorder.items) == emitted and (recorder.terminal_stamp or 0) < disposed_at, where
                peak_threads = max(peak_threads, threading.active_count())
        assert idle(), "an I/O thread or task stayed blocked after the last dispose"
        peak_threads = max(peak_threads, threading.active_count())
    finally:
        release.set()
        transport.close()
        server.close()
        if pool is not None:
            pool.shutdown()
    elapsed = time.monotonic() - started
    assert threading.active_count() <= baseline_threads, "threads leaked"
    assert open_fds() <= baseline_fds, "sockets or file descriptors leaked"
    assert peak_threads <= baseline_threads + STREAMS + 1 + STREAMS * 2, f"thread count grew to {peak_threads}"
    assert pool is None or pool.peak <= STREAMS
    print(f"\n{kind}: {CYCLES[kind]} cycles in {elapsed:.2f}s: {dict(counts)}; {len(server.connections)} connections, "
          f"{len(server.requests)} requests; spin cycles at dispose: {dict(spin_outcomes)}; "
          f"peak threads {peak_threads} (baseline {baseline_threads})")


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_more_completed_streams_than_the_pool_holds_all_complete(kind: str) -> None:
    """Each finished stream gives its connection back: 30 sequential turns through a pool of 2.

    (A transport that cancels its own task from the terminal event's auto-dispose interrupts
    ``aclose()``: every stream that ends at ``[DONE]`` then keeps its pooled connection, and the
    third request waits for a free connection until the pool timeout. This test fails then.)
    """
    baseline_fds = open_fds()
    transport = make_transport(kind, streams=2)
    try:
        with StubServer(responder=lambda _: StubResponse(body=OPENAI.stream("a", "b"))) as server:
            model = OPENAI.make(server.url, transport=transport, retry_policy=RetryPolicy.never())
            for turn in range(30):
                recorder = Recorder()
                recorder.subscribe(model.generate_content(REQUEST, stream=True))
                recorder.wait(f"turn {turn} through a pool of 2 connections", timeout=2.0)
                assert recorder.completed and recorder.items[-1].text() == "ab", (turn, recorder.errors)
    finally:
        transport.close()
    assert open_fds() <= baseline_fds, "sockets leaked"


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_burst_of_disposed_requests_leaves_the_pool_usable(kind: str) -> None:
    """3,000 subscribe-then-dispose in a burst against 8 connections, then every turn still completes at once.

    (On asyncio, httpcore 1.0.9 leaked a pool slot for each request cancelled while it waited in the
    pool's queue -- encode/httpcore#1093 -- and the abandoned requests drained in quadratic time:
    this burst left all 8 slots CONNECTING and the next request failed after the pool timeout.)
    """
    baseline_fds = open_fds()
    transport = make_transport(kind, streams=8)
    pool = CountingPool(8) if kind == "threads" else None
    options: dict[str, Any] = {"scheduler": pool} if pool is not None else {}
    started = time.monotonic()
    try:
        with StubServer(responder=lambda _: StubResponse(body=OPENAI.stream("a", "b"))) as server:
            model = OPENAI.make(server.url, transport=transport, retry_policy=RetryPolicy.never(), **options)
            for _ in range(3000):
                model.generate_content(REQUEST, stream=True).subscribe().dispose()
            burst = time.monotonic() - started
            if pool is not None:
                assert pool.wait_idle(TIMEOUT)
            else:
                assert isinstance(transport, AsyncHttpTransport)
                assert loop_idle(transport), "the abandoned requests did not drain"
            drained = time.monotonic() - started
            for turn in range(20):
                recorder = Recorder()
                recorder.subscribe(model.generate_content(REQUEST, stream=True))
                recorder.wait(f"turn {turn} after the burst", timeout=2.0)
                assert recorder.completed and recorder.items[-1].text() == "ab", (turn, recorder.errors)
    finally:
        transport.close()
        if pool is not None:
            pool.shutdown()
    assert open_fds() <= baseline_fds, "sockets leaked"
    print(f"\n{kind}: 3000 disposed in a burst in {burst:.2f}s, drained after {drained:.2f}s; "
          f"{len(server.requests)} requests reached the server")
