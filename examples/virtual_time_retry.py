"""A retry test in virtual time: a ``TestScheduler`` drives the backoff, so seconds of waiting take none.

The model's I/O runs on the calling thread (``ImmediateScheduler``) and its retry timers on a
``reactivex.testing.TestScheduler``. A loopback stub server answers 503, then 429 with
``Retry-After: 2``, then streams the answer. The script advances the virtual clock and shows
that the second request comes at 0.4 s (the default backoff), the third at 2.4 s (Retry-After
replaced the 0.8 s backoff), and not a moment earlier. A second scenario exhausts the three
attempts and ends in ``on_error``.

Run it::

    python examples/virtual_time_retry.py

It exits 0 and prints ``virtual-time retry: OK`` when every check passed.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler

from rxllm import Content, HttpStatusError, LlmRequest, Part, RetryPolicy
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer, assert_stream_protocol, sse_turn

REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("Hello?")])])


class Recorder:
    """What the stream emitted (everything arrives on this thread: no latches needed)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.errors: list[Exception] = []
        self.completed = False

    def on_completed(self) -> None:
        self.completed = True


def check(label: str, condition: bool, failures: list[str]) -> None:
    """Print one check and remember a failure."""
    print(f"  {'ok ' if condition else 'FAIL'} {label}")
    if not condition:
        failures.append(label)


def retried_until_success(failures: list[str]) -> None:
    """503, then 429 with Retry-After: 2, then the answer."""
    print("503, then 429 with Retry-After: 2, then the answer:")
    script = [
        StubResponse.json(503, {"error": {"message": "overloaded"}}),
        StubResponse.json(429, {"error": {"message": "slow down"}}, headers={"retry-after": "2"}),
        StubResponse(body=sse_turn("openai-chat", text=["Hello ", "again."])),
    ]
    with StubServer(script) as server:
        clock = TestScheduler()
        model = OpenAiChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-example",
                                scheduler=ImmediateScheduler(), timer_scheduler=clock,
                                retry_policy=RetryPolicy(jitter="none"))  # exact backoff: named instants
        recorder = Recorder()
        model.generate_content(REQUEST, stream=True).subscribe(
            recorder.items.append, recorder.errors.append, recorder.on_completed)
        check("t=0.000 s: request 1 sent inside subscribe (503)", len(server.requests) == 1, failures)
        for at, expected in ((0.399, 1), (0.4, 2), (2.399, 2), (2.4, 3)):
            clock.advance_to(at)
            check(f"t={at:.3f} s: {expected} request(s) made", len(server.requests) == expected, failures)
        check("completed with the answer, no error",
              recorder.completed and not recorder.errors
              and assert_stream_protocol(recorder.items).text() == "Hello again.", failures)


def gives_up_after_three_attempts(failures: list[str]) -> None:
    """Three 503s: three requests (at 0, 0.4 and 1.2 s), then on_error with the last one."""
    print("three 503s:")
    with StubServer([StubResponse.json(503, {"error": {"message": "overloaded"}}) for _ in range(3)]) as server:
        clock = TestScheduler()
        model = OpenAiChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-example",
                                scheduler=ImmediateScheduler(), timer_scheduler=clock,
                                retry_policy=RetryPolicy(max_attempts=3, jitter="none"))
        recorder = Recorder()
        model.generate_content(REQUEST, stream=True).subscribe(
            recorder.items.append, recorder.errors.append, recorder.on_completed)
        clock.advance_to(1.199)
        check("t=1.199 s: 2 requests, still waiting", len(server.requests) == 2 and not recorder.errors, failures)
        clock.advance_to(1.2)
        error = recorder.errors[0] if recorder.errors else None
        check("t=1.200 s: request 3, then on_error(HttpStatusError 503)",
              len(server.requests) == 3 and isinstance(error, HttpStatusError) and error.status_code == 503, failures)
        clock.advance_to(3600.0)
        check("an hour later: still 3 requests", len(server.requests) == 3, failures)


def main() -> int:
    """Run both scenarios; return 0 when every check passed."""
    logging.basicConfig(level=logging.WARNING, format="  log  %(name)s: %(message)s", stream=sys.stdout)
    failures: list[str] = []
    retried_until_success(failures)
    gives_up_after_three_attempts(failures)
    print("virtual-time retry: OK" if not failures else f"virtual-time retry: {len(failures)} check(s) FAILED")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
