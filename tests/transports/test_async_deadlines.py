"""The asyncio transport's total_timeout deadlines: ``asyncio.timeout`` semantics (the expiry cancels
the task and surfaces as ``TimeoutError``; a cancellation of its own passes through), behind one
timer per transport instead of one per open stream."""

from __future__ import annotations

import asyncio

import pytest

from rxllm._transports.asynchronous import _Deadline, _Deadlines


def test_an_expired_deadline_raises_timeout_error_and_says_so() -> None:
    async def main() -> None:
        deadlines = _Deadlines(asyncio.get_running_loop())
        deadline = _Deadline(deadlines, 0.0)
        with pytest.raises(TimeoutError):
            async with deadline:
                await asyncio.get_running_loop().create_future()  # never done: only the expiry ends it
        assert deadline.expired()
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]  # uncancelled
        assert deadlines._handle is None and not deadlines._heap

    asyncio.run(main())


def test_a_deadline_exited_in_time_never_fires_and_the_last_one_cancels_the_timer() -> None:
    async def main() -> None:
        deadlines = _Deadlines(asyncio.get_running_loop())
        first, second = _Deadline(deadlines, 3600.0), _Deadline(deadlines, 7200.0)
        async with first, second:
            assert deadlines._handle is not None
            await asyncio.sleep(0)
        assert not first.expired() and not second.expired()
        assert deadlines._handle is None and not deadlines._heap

    asyncio.run(main())


def test_an_outside_cancellation_passes_through_as_cancelled_error() -> None:
    async def main() -> None:
        deadlines = _Deadlines(asyncio.get_running_loop())
        entered = asyncio.Event()

        async def attempt() -> None:
            async with _Deadline(deadlines, 3600.0):
                entered.set()
                await asyncio.get_running_loop().create_future()

        task = asyncio.ensure_future(attempt())
        await entered.wait()
        task.cancel()  # a dispose, not the deadline
        with pytest.raises(asyncio.CancelledError):
            await task
        assert deadlines._handle is None and not deadlines._heap

    asyncio.run(main())


def test_deadlines_expire_earliest_first_and_only_the_due_ones() -> None:
    whens: dict[str, float] = {}

    async def main() -> list[str]:
        deadlines = _Deadlines(asyncio.get_running_loop())
        ended: list[str] = []
        gate = asyncio.Event()  # a future per waiter: cancelling one waiter leaves the others waiting

        async def attempt(name: str, delay: float) -> None:
            deadline = _Deadline(deadlines, delay)
            assert deadline.when is not None
            whens[name] = deadline.when
            try:
                async with deadline:
                    await gate.wait()
            except TimeoutError:
                ended.append(f"{name} timed out")
            else:
                ended.append(f"{name} done")

        # many exited deadlines (the heap is rebuilt without them) beside the ones that expire
        quick = [asyncio.ensure_future(attempt(f"q{i}", 3600.0)) for i in range(100)]
        late = asyncio.ensure_future(attempt("late", 3600.0))
        second = asyncio.ensure_future(attempt("second", 0.002))
        first = asyncio.ensure_future(attempt("first", 0.0))
        await asyncio.wait_for(asyncio.gather(first, second), 10)
        gate.set()
        await asyncio.gather(late, *quick)
        assert deadlines._handle is None and not deadlines._heap
        return ended

    ended = asyncio.run(main())
    earliest = sorted(["first", "second"], key=whens.__getitem__)
    assert ended[:2] == [f"{name} timed out" for name in earliest]
    assert sorted(ended[2:]) == sorted(["late done"] + [f"q{i} done" for i in range(100)])
