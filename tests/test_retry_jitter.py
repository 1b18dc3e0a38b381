"""Jittered backoff: failures that happen together do not retry together,
and a seeded random source makes the schedule repeatable under a ``TestScheduler``."""

from __future__ import annotations

import random
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex.testing import TestScheduler

from rxllm import ConfigurationError, HttpStatusError, RetryPolicy, TransportError, retry_before_first_item


def _retry_instants(policy: RetryPolicy, subscribers: int) -> list[list[float]]:
    """Each subscriber's attempt times against a source that always fails, in virtual time."""
    clock = TestScheduler()
    instants: list[list[float]] = []
    for _ in range(subscribers):
        times: list[float] = []
        instants.append(times)

        def failing(observer: rx_abc.ObserverBase[Any], _: Any = None, times: list[float] = times) -> Any:
            times.append(clock.to_seconds(clock.clock))
            observer.on_error(TransportError("connection reset"))
            return reactivex.disposable.Disposable()

        retry_before_first_item(reactivex.create(failing), policy, clock).subscribe(on_error=lambda _: None)
    clock.advance_to(3600.0)
    return instants


def test_a_hundred_failures_at_once_spread_their_retries_over_the_backoff_window() -> None:
    instants = _retry_instants(RetryPolicy(max_attempts=2, base_delay=0.2), 100)
    retries = sorted(times[1] for times in instants)
    assert all(0.0 <= t < 0.4 for t in retries)
    window_50ms = max(sum(1 for t in retries if start <= t < start + 0.05) for start in retries)
    assert window_50ms < 40, f"{window_50ms} of 100 retries inside one 50 ms window"
    assert retries[-1] - retries[0] > 0.2


def test_a_seeded_random_source_makes_the_schedule_repeatable() -> None:
    first = _retry_instants(RetryPolicy(max_attempts=4, rng=random.Random(1234)), 5)
    again = _retry_instants(RetryPolicy(max_attempts=4, rng=random.Random(1234)), 5)
    other = _retry_instants(RetryPolicy(max_attempts=4, rng=random.Random(4321)), 5)
    assert first == again and first != other
    assert all(len(times) == 4 for times in first)


def test_jitter_none_is_the_exact_backoff_and_retry_after_is_never_jittered() -> None:
    exact = RetryPolicy(jitter="none", max_delay=1.0)
    assert [exact.delay_for(HttpStatusError(503), n) for n in (1, 2)] == [0.4, 0.8]
    assert RetryPolicy(max_attempts=9, jitter="none", max_delay=1.0).delay_for(HttpStatusError(503), 5) == 1.0
    jittered = RetryPolicy(rng=random.Random(0))
    assert {jittered.delay_for(HttpStatusError(429, retry_after=2.0), 1) for _ in range(10)} == {2.0}


def test_an_unknown_jitter_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(jitter="half")  # type: ignore[arg-type]
