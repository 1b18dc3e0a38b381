"""Async retries are not delayed by pool size: a retry leaves when its timer fires, however many
connections the pool holds.

Not timed: the retry's backoff runs on a virtual clock, and the test checks the order of events.
100 streams hold their pooled connections open (the server holds each body after its first
event) and 100 more connections sit idle in the pool; a call that got a 503 retries when the clock
reaches its backoff, and its retry must reach the server while every one of those 100 streams is
still held: nothing about the pool's other connections stands between the timer and the request.
"""

from __future__ import annotations

import threading

from faults_support import REQUEST, TIMEOUT, Recorder
from virtual_clock import VirtualClock
from wire import OPENAI

from rxllm import AsyncHttpTransport, HttpStatusError, RetryPolicy
from rxllm.testing import Hold, RecordedRequest, StubResponse, StubServer

HELD = 100
IDLE = 100


def test_an_async_retry_is_sent_at_its_timer_while_100_pooled_connections_are_busy() -> None:
    release = threading.Event()
    idle_gate = threading.Event()  # holds the warm-up calls until all IDLE connections are open
    events = OPENAI.stream("held", " done")
    retried = threading.Event()
    failures = iter([StubResponse(status=503, headers={"content-type": "application/json"},
                                  body=[b'{"error": {"message": "overloaded"}}'])])

    def responder(request: RecordedRequest) -> StubResponse:
        if request.path.startswith("/warm"):
            return StubResponse(before_headers=[Hold(idle_gate, timeout=TIMEOUT)], body=OPENAI.stream("warm"))
        if request.path.startswith("/held"):
            return StubResponse(body=[*events[:2], Hold(release, timeout=120.0), *events[2:]])
        failure = next(failures, None)
        if failure is not None:
            return failure
        retried.set()
        return OPENAI.response("after", " retry")

    transport = AsyncHttpTransport(read_timeout=120.0)  # the default size: 10,000 connections; held bodies wait
    clock = VirtualClock()
    try:
        with StubServer(responder=responder) as server:
            # IDLE keep-alive connections in the pool: opened together, then all back in the pool.
            warm = OPENAI.make(f"{server.url}/warm", transport=transport, retry_policy=RetryPolicy.never())
            warmers = [Recorder() for _ in range(IDLE)]
            for recorder in warmers:
                recorder.subscribe(warm.generate_content(REQUEST, stream=True))
            assert server.wait_for_requests(IDLE, TIMEOUT)
            idle_gate.set()
            for recorder in warmers:
                recorder.wait("a warm-up call")
                assert recorder.completed, recorder.errors

            # HELD streams holding their connections, each having delivered its first partial.
            held_model = OPENAI.make(f"{server.url}/held", transport=transport, retry_policy=RetryPolicy.never())
            held = [Recorder(notify_after=1) for _ in range(HELD)]
            for recorder in held:
                recorder.subscribe(held_model.generate_content(REQUEST, stream=True))
            for recorder in held:
                assert recorder.reached.wait(TIMEOUT), "a held stream never started"

            policy = RetryPolicy(max_attempts=2, base_delay=1.0, jitter="none")
            due = policy.delay_for(HttpStatusError(503), 1)
            assert due is not None and due > 0.001
            model = OPENAI.make(f"{server.url}/retry", transport=transport, retry_policy=policy,
                                timer_scheduler=clock)
            recorder = Recorder()
            recorder.subscribe(model.generate_content(REQUEST, stream=True))
            assert clock.wait_timers(1), "the 503 never scheduled its retry"
            requests_before = len(server.requests)
            clock.advance_to(due - 0.001)
            assert len(server.requests) == requests_before and not retried.is_set(), "retried before its timer"
            clock.advance_to(due)
            # The retry goes out now, with every held stream still holding its connection.
            assert retried.wait(TIMEOUT), "the retry did not reach the server while the pool was busy"
            recorder.wait("the retried call")
            assert all(not r.done.is_set() for r in held), [r.errors for r in held if r.done.is_set()][:3]
            assert recorder.errors == [] and recorder.items[-1].text() == "after retry"
            release.set()
            for stream in held:
                stream.wait("a held stream")
                assert stream.completed and stream.items[-1].text() == "held done"
    finally:
        release.set()
        idle_gate.set()
        transport.close()
