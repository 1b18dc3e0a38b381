"""What a subscriber's callbacks reach is freed when the stream is over, without the collector.

reactivex's ``concat`` keeps its subscribers in a reference cycle (a closure that schedules
itself); rxllm's attempt observer lets go of the subscriber once it delivered the terminal
event, so the cycle holds only that empty shell (a disposed stream's chain holds none: the last
test keeps it that way). Measured before: a subscriber that kept
100,000 partials kept 600,000 objects alive until the collector's next full pass, and every
full pass meanwhile walked them (the "partials kept" benchmark row paid for it twice). The
collector is switched off here, so only reference counting can free anything.
"""

from __future__ import annotations

import json
import threading
import time
import weakref

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, make_transport
from wire import OPENAI

from rxllm import LlmResponse, RetryPolicy
from rxllm.testing import Hold, StubResponse, StubServer


class Kept(list[LlmResponse]):
    """A list a weak reference can point to."""


def _freed(ref: weakref.ref[Kept]) -> bool:
    """Whether ``ref`` died: the I/O thread or task may still be unwinding its last frames after
    the terminal callback, so this looks until a deadline (there is no event for "a frame ended")."""
    deadline = time.monotonic() + TIMEOUT
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.005)
    return ref() is None


def _subscribe(model: object, stream: bool, done: threading.Event) -> weakref.ref[Kept]:
    """Subscribe a subscriber that keeps every response; the subscription itself is not kept (it
    holds the subscriber, as in RxJava)."""
    kept = Kept()
    model.generate_content(REQUEST, stream=stream).subscribe(kept.append, lambda _: done.set(), done.set)  # type: ignore[attr-defined]
    return weakref.ref(kept)


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_what_a_finished_stream_delivered_is_freed_by_reference_counting(kind: str, stream: bool) -> None:
    transport = make_transport(kind)
    try:
        if stream:
            response = OPENAI.response("Hello", " world")
        else:
            body = json.dumps(OPENAI.complete_body("Hello world")).encode()
            response = StubResponse(headers={"content-type": "application/json"}, body=[body], chunked=False)
        with StubServer([response]) as server:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            done = threading.Event()
            ref = _subscribe(model, stream, done)
            assert done.wait(TIMEOUT)
            assert _freed(ref), "the partials outlived the stream until a garbage collection"
    finally:
        transport.close()


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_what_a_disposed_stream_delivered_is_freed_by_reference_counting(kind: str) -> None:
    release = threading.Event()
    events = OPENAI.stream("Hello", " world")
    transport = make_transport(kind)
    try:
        with StubServer([StubResponse(body=[*events[:2], Hold(release, timeout=30.0), *events[2:]])]) as server:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            got_one = threading.Event()
            holder = [Kept()]  # the subscriber's only way to its list: emptied to let go of it

            def on_next(response: LlmResponse) -> None:
                if holder:
                    holder[0].append(response)
                got_one.set()

            subscription = model.generate_content(REQUEST, stream=True).subscribe(on_next)
            ref = weakref.ref(holder[0])
            assert got_one.wait(TIMEOUT)
            subscription.dispose()
            holder.clear()
            assert _freed(ref), "the partials outlived the disposed stream until a garbage collection"
            release.set()
    finally:
        release.set()
        transport.close()
