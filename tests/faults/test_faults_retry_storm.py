"""429 storms with ``Retry-After``: the policy's schedule holds, the attempt budget is never exceeded.

Timers run on a ``TestScheduler`` (virtual time) and the requests on an ``ImmediateScheduler``, so
each retry's request reaches the loopback server at an exact virtual instant, which the
responder records. The schedule expected here is computed by the test from the documented rule
(``Retry-After`` / ``retry-after-ms`` / an HTTP date replaces the backoff ``base_delay * 2**n``,
capped at ``max_retry_after``; at most ``max_attempts`` attempts), not by calling the policy.
The asyncio transport runs the same storm in virtual time (each step waits until the retry timer
is set, since requests run on the transport's loop) and an endless storm with real timers.
"""

from __future__ import annotations

import email.utils
import itertools
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from faults_support import REQUEST, TIMEOUT, Recorder
from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler
from virtual_clock import VirtualClock
from wire import WIRES, Wire

from rxllm import AsyncHttpTransport, Content, HttpStatusError, HttpTransport, LlmRequest, Part, RetryPolicy
from rxllm.testing import RecordedRequest, StubResponse, StubServer

SEED = 0x429_5702


@dataclass(frozen=True)
class Failure:
    """One failed attempt: its status and Retry-After header(s), and the delay the rule gives it."""

    status: int
    headers: dict[str, str]
    retry_after: float | None  # what the header says, in seconds (None: no usable header)

    def response(self) -> StubResponse:
        return StubResponse.json(self.status, {"error": {"message": "slow down"}}, headers=self.headers)


def expected_delay(policy: RetryPolicy, failure: Failure, attempt: int) -> float:
    if failure.retry_after is not None:
        return min(max(failure.retry_after, 0.0), policy.max_retry_after)
    return policy.base_delay * 2**attempt


class Storm:
    """A loopback server that answers from a script, recording the virtual time of every request."""

    def __init__(self, clock: TestScheduler) -> None:
        self.clock = clock
        self.script: list[StubResponse] = []
        self.times: list[float] = []
        self.server = StubServer(responder=self._answer).start()

    def _answer(self, request: RecordedRequest) -> StubResponse:
        self.times.append(float(self.clock.clock))
        if self.script:
            return self.script.pop(0)
        return Failure(429, {"retry-after": "1"}, 1.0).response()  # an endless storm


@pytest.fixture
def clock() -> TestScheduler:
    return TestScheduler()


@pytest.fixture
def storm(clock: TestScheduler) -> Iterator[Storm]:
    storm = Storm(clock)
    try:
        yield storm
    finally:
        storm.server.close()


@pytest.fixture
def transport() -> Iterator[HttpTransport]:
    transport = HttpTransport(max_concurrent_streams=4)
    try:
        yield transport
    finally:
        transport.close()


def model_for(wire: Wire, storm: Storm, transport: HttpTransport, policy: RetryPolicy):  # type: ignore[no-untyped-def]
    return wire.model(storm.server.url, transport=transport, scheduler=ImmediateScheduler(),
                      timer_scheduler=storm.clock, retry_policy=policy)


def http_date(seconds_from_now: float) -> str:
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
def test_a_429_storm_follows_retry_after_to_the_second_then_succeeds(
    wire: Wire, storm: Storm, transport: HttpTransport
) -> None:
    policy = RetryPolicy(max_attempts=6, base_delay=0.25, max_retry_after=30.0, jitter="none")
    failures = [
        Failure(429, {"retry-after": "3"}, 3.0),
        Failure(429, {"retry-after-ms": "1500"}, 1.5),
        Failure(429, {"retry-after": "86400"}, 86400.0),  # capped at max_retry_after
        Failure(503, {}, None),  # no header: backoff 0.25 * 2**4
        Failure(429, {"retry-after": "0.75", "retry-after-ms": "250"}, 0.25),  # the ms form wins
    ]
    storm.script = [f.response() for f in failures] + [wire.response("finally")]
    recorder = Recorder()
    recorder.subscribe(model_for(wire, storm, transport, policy).generate_content(REQUEST, stream=True))
    expected = [0.0]
    for attempt, failure in enumerate(failures, start=1):
        expected.append(expected[-1] + expected_delay(policy, failure, attempt))
    for before, due in itertools.pairwise(expected):
        storm.clock.advance_to(due - 0.001)
        assert len(storm.times) == expected.index(due), f"a retry before its time ({due}s): {storm.times}"
        assert not recorder.done.is_set()
        storm.clock.advance_to(due)
        assert storm.times[-1] == pytest.approx(due), storm.times
        assert before < due
    assert storm.times == pytest.approx(expected)
    assert recorder.completed and recorder.items[-1].text() == "finally"
    storm.clock.advance_to(expected[-1] + 3600)
    assert len(storm.times) == len(expected) == policy.max_attempts


@pytest.mark.parametrize("max_attempts", [1, 2, 3, 7])
def test_an_endless_storm_makes_exactly_max_attempts_requests(
    max_attempts: int, storm: Storm, transport: HttpTransport
) -> None:
    policy = RetryPolicy(max_attempts=max_attempts, base_delay=0.1, max_retry_after=5.0, jitter="none")
    subscribers = 25
    recorders = [Recorder() for _ in range(subscribers)]
    for recorder in recorders:  # 25 concurrent subscriptions, each with its own budget
        recorder.subscribe(model_for(WIRES[0], storm, transport, policy).generate_content(REQUEST, stream=True))
    storm.clock.advance_to(10_000.0)
    assert len(storm.times) == subscribers * max_attempts, "the attempt budget was exceeded (or not used)"
    assert sorted(set(storm.times)) == pytest.approx([float(n) for n in range(max_attempts)])  # every 1 s
    for recorder in recorders:
        assert recorder.items == [] and len(recorder.errors) == 1
        (error,) = recorder.errors
        assert isinstance(error, HttpStatusError) and error.status_code == 429 and error.retry_after == 1.0


def test_an_http_date_retry_after_is_honoured(storm: Storm, transport: HttpTransport) -> None:
    policy = RetryPolicy(max_attempts=3, max_retry_after=120.0, jitter="none")
    storm.script = [Failure(429, {"retry-after": http_date(30)}, None).response(), WIRES[0].response("ok")]
    recorder = Recorder()
    recorder.subscribe(model_for(WIRES[0], storm, transport, policy).generate_content(REQUEST, stream=True))
    storm.clock.advance_to(27.9)  # the date has a one-second resolution and a little wall time passes
    assert len(storm.times) == 1, storm.times
    storm.clock.advance_to(30.0)
    assert len(storm.times) == 2 and 28.0 <= storm.times[1] <= 30.0, storm.times
    assert recorder.completed


def test_a_huge_http_date_is_capped_and_a_past_one_retries_at_once(storm: Storm, transport: HttpTransport) -> None:
    policy = RetryPolicy(max_attempts=3, max_retry_after=10.0, jitter="none")
    storm.script = [
        Failure(429, {"retry-after": http_date(7 * 86400)}, None).response(),
        Failure(429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None).response(),
        WIRES[0].response("ok"),
    ]
    recorder = Recorder()
    recorder.subscribe(model_for(WIRES[0], storm, transport, policy).generate_content(REQUEST, stream=True))
    storm.clock.advance_to(9.999)
    assert len(storm.times) == 1
    storm.clock.advance_to(10.0)
    assert storm.times == pytest.approx([0.0, 10.0, 10.0]) and recorder.completed


def test_random_storms_keep_the_schedule_and_the_budget(storm: Storm, transport: HttpTransport) -> None:
    """Seeded random storms mixing every header form, garbage headers and 5xx without headers."""
    rng = random.Random(SEED)
    forms = [
        lambda s: ({"retry-after": f"{s:g}"}, s),
        lambda s: ({"retry-after-ms": str(int(s * 1000))}, int(s * 1000) / 1000),
        lambda s: ({"retry-after": "soon"}, None),  # unparseable: the backoff applies
        lambda s: ({"retry-after": "-5"}, 0.0),  # negative: retry at once
        lambda s: ({}, None),
    ]
    storms = 200
    total_requests = 0
    for number in range(storms):
        policy = RetryPolicy(max_attempts=rng.randint(1, 6), base_delay=rng.choice([0.0, 0.05, 0.2]),
                             max_retry_after=rng.choice([0.5, 2.0, 60.0]), jitter="none")
        length = rng.randint(0, 7)
        failures = []
        for _ in range(length):
            headers, seconds = rng.choice(forms)(rng.choice([0.001, 0.3, 1.0, 2.5, 90.0]))
            failures.append(Failure(rng.choice([429, 429, 503, 500, 408]), headers, seconds))
        storm.script = [f.response() for f in failures] + [WIRES[0].response("ok")]
        storm.times.clear()
        start = float(storm.clock.clock)
        recorder = Recorder()
        recorder.subscribe(model_for(WIRES[0], storm, transport, policy).generate_content(REQUEST, stream=True))
        storm.clock.advance_to(start + 10_000.0)
        attempts = min(length + 1, policy.max_attempts)
        expected = [start]
        for attempt, failure in enumerate(failures[: attempts - 1], start=1):
            expected.append(expected[-1] + expected_delay(policy, failure, attempt))
        where = f"storm {number} (seed {SEED:#x}): {policy}, {failures}"
        assert storm.times == pytest.approx(expected, abs=1e-6), where
        assert len(storm.times) <= policy.max_attempts, where
        if length < policy.max_attempts:
            assert recorder.completed and recorder.items[-1].text() == "ok", where
        else:
            (error,) = recorder.errors
            assert isinstance(error, HttpStatusError) and error.status_code == failures[attempts - 1].status, where
        total_requests += len(storm.times)
        storm.script.clear()
    print(f"\n{storms} random storms, {total_requests} requests, all on schedule and within budget")


# --- the asyncio transport: requests run on its loop, so each step waits for the retry timer to be set ------------


def test_a_429_storm_on_the_asyncio_transport_follows_retry_after_in_virtual_time() -> None:
    clock = VirtualClock()
    storm = Storm(clock)
    transport = AsyncHttpTransport(max_concurrent_streams=4)
    policy = RetryPolicy(max_attempts=5, base_delay=0.25, max_retry_after=30.0, jitter="none")
    failures = [
        Failure(429, {"retry-after": "3"}, 3.0),
        Failure(429, {"retry-after-ms": "1500"}, 1.5),
        Failure(429, {"retry-after": "86400"}, 86400.0),
        Failure(503, {}, None),
    ]
    storm.script = [f.response() for f in failures] + [WIRES[0].response("finally")]
    try:
        model = WIRES[0].model(storm.server.url, transport=transport, timer_scheduler=clock, retry_policy=policy)
        recorder = Recorder()
        recorder.subscribe(model.generate_content(REQUEST, stream=True))
        due = 0.0
        for attempt, failure in enumerate(failures, start=1):
            assert clock.wait_timers(attempt), f"attempt {attempt} failed but no retry was scheduled"
            due += expected_delay(policy, failure, attempt)
            clock.advance_to(due - 0.001)
            assert len(storm.times) == attempt, f"a retry before its time ({due}s): {storm.times}"
            clock.advance_to(due)
            assert storm.server.wait_for_requests(attempt + 1, TIMEOUT), f"no retry at {due}s"
            assert storm.times[-1] == pytest.approx(due)
        recorder.wait("the storm's last attempt")
        assert recorder.completed and recorder.items[-1].text() == "finally"
        clock.advance_to(due + 3600)
        assert len(storm.times) == len(failures) + 1 == policy.max_attempts
    finally:
        transport.close()
        storm.server.close()


def test_an_endless_storm_on_the_asyncio_transport_keeps_budget_and_spacing_in_real_time() -> None:
    """Real timers on the transport's loop, tiny Retry-After values: per subscriber, exactly the budget."""
    policy = RetryPolicy(max_attempts=4, base_delay=0.0, max_retry_after=0.05, jitter="none")
    arrivals: dict[str, list[float]] = {}
    lock = threading.Lock()
    header_for = [({"retry-after-ms": "20"}, 0.02), ({"retry-after": "30"}, 0.05), ({"retry-after": "0.01"}, 0.01)]

    def responder(request: RecordedRequest) -> StubResponse:
        who = request.json()["messages"][-1]["content"]
        with lock:
            times = arrivals.setdefault(who, [])
            times.append(time.monotonic())
            headers, _ = header_for[(len(times) - 1) % len(header_for)]
        return StubResponse.json(429, {"error": {"message": "slow down"}}, headers=headers)

    transport = AsyncHttpTransport(max_concurrent_streams=32)
    subscribers = 20
    recorders = [Recorder() for _ in range(subscribers)]
    try:
        with StubServer(responder=responder) as server:
            model = WIRES[0].model(server.url, transport=transport, retry_policy=policy)
            for n, recorder in enumerate(recorders):
                request = LlmRequest(contents=(Content(role="user", parts=(Part.from_text(f"subscriber {n}"),)),))
                recorder.subscribe(model.generate_content(request, stream=True))
            for recorder in recorders:
                recorder.wait("an endless storm")
    finally:
        transport.close()
    assert sorted(arrivals) == sorted(f"subscriber {n}" for n in range(subscribers))
    for who, times in arrivals.items():
        assert len(times) == policy.max_attempts, f"{who}: {len(times)} attempts"
        for attempt, (before, after) in enumerate(itertools.pairwise(times)):
            wanted = header_for[attempt % len(header_for)][1]
            assert after - before >= wanted - 0.002, f"{who}: retry {attempt + 1} after {after - before:.4f}s"
    for recorder in recorders:
        (error,) = recorder.errors
        assert isinstance(error, HttpStatusError) and error.status_code == 429
