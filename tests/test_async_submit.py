"""``AsyncHttpTransport.submit`` hands a coroutine to the transport's loop and returns a small handle
(every open stream keeps one for its whole life, so it is not a ``concurrent.futures.Future``):
cancelling it from any thread cancels the task, or keeps a task that has not started from ever
running; closing the transport cancels what is still pending. Synchronised with events, no sleeps."""

from __future__ import annotations

import asyncio
import threading

from rxllm import AsyncHttpTransport


def test_a_submitted_coroutine_runs_in_the_submitters_context_and_is_forgotten_when_done() -> None:
    transport = AsyncHttpTransport()
    ran = threading.Event()
    seen: list[bool] = []

    async def work() -> None:
        seen.append(threading.current_thread() is not threading.main_thread())
        ran.set()

    try:
        submitted = transport.submit(work())
        assert ran.wait(10)
        finished = asyncio.run_coroutine_threadsafe(_until_done(submitted.task), transport.loop)
        finished.result(10)
        assert seen == [True]
        assert submitted not in transport._tasks
    finally:
        transport.close()


async def _until_done(task: asyncio.Task[None] | None) -> None:
    assert task is not None
    await asyncio.wait([task])


def test_cancelling_from_another_thread_cancels_the_running_task() -> None:
    transport = AsyncHttpTransport()
    started = threading.Event()
    outcome: list[str] = []
    ended = threading.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        finally:
            ended.set()

    try:
        submitted = transport.submit(work())
        assert started.wait(10)
        assert submitted.cancel() is True
        assert ended.wait(10)
        assert outcome == ["cancelled"]
    finally:
        transport.close()


def test_a_handle_cancelled_before_its_task_starts_never_runs_it() -> None:
    transport = AsyncHttpTransport()
    loop = transport.loop
    gate = threading.Event()
    ran: list[bool] = []

    async def work() -> None:
        ran.append(True)

    try:
        loop.call_soon_threadsafe(gate.wait)  # hold the loop so the submission cannot start yet
        submitted = transport.submit(work())
        submitted.cancel()
        gate.set()
        passed = threading.Event()
        loop.call_soon_threadsafe(passed.set)  # queued after the submission: once it ran, so did that
        assert passed.wait(10)
        assert ran == [] and submitted.task is None
        assert submitted not in transport._tasks
    finally:
        transport.close()


async def _waits_until_cancelled(started: threading.Event | asyncio.Event, outcome: list[str]) -> None:
    """Set ``started``, then wait until cancelled; ``outcome`` records the cancellation and the end."""
    started.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        outcome.append("cancelled")
        raise
    finally:
        outcome.append("ended")


def test_closing_the_transport_cancels_a_task_still_running() -> None:
    transport = AsyncHttpTransport()
    started = threading.Event()
    outcome: list[str] = []
    transport.submit(_waits_until_cancelled(started, outcome))
    assert started.wait(10)
    transport.close()
    assert outcome == ["cancelled", "ended"]


def test_closing_a_bound_transport_cancels_only_its_own_tasks() -> None:
    async def main() -> list[str]:
        transport = AsyncHttpTransport(loop=asyncio.get_running_loop())
        outcome: list[str] = []
        started = asyncio.Event()
        bystander = asyncio.ensure_future(asyncio.Event().wait())
        submitted = transport.submit(_waits_until_cancelled(started, outcome))
        await started.wait()
        await transport.aclose()
        assert submitted.task is not None
        await asyncio.wait([submitted.task])
        assert not bystander.done()
        bystander.cancel()
        return outcome

    assert asyncio.run(main()) == ["cancelled", "ended"]
