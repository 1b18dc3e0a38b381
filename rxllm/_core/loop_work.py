"""Which rxllm work each blocking wait on an event loop's thread would wait for, so that a wait
that could never end fails at once instead of hanging.

A blocking wait (``for`` over ``rxllm.iterate``, ``model.stream()``, ``.run()``) on the thread
of a running event loop stops that loop until the wait ends. When the stream waited on needs that
very loop (an ``AsyncHttpTransport`` bound to it, an ``async def`` tool running there), the wait
would never end. The check is per stream, not per loop: work that other streams have on the loop
(an ``async for`` the wait interrupts, a callback subscriber) stalls while the wait blocks, but
the wait itself ends, and it is not refused.

How the work of the stream waited on is told apart from the rest:

* a blocking wait registers itself (:func:`begin`) before it subscribes, and subscribes inside
  :meth:`Wait.subscribing`, so work queued while subscribing is its own (:func:`current_owner`);
* whatever queues rxllm work on a loop calls :func:`hold` until the work ends. The work counts
  against every wait on that loop registered before it, unless it was queued on behalf of a
  known owner (a wait's subscription, or a run that captured its owner when it was subscribed,
  with :func:`owning` around the work it queues later), in which case only that owner's wait
  counts it. Work queued before a wait began is never its own: its stream did not exist yet;
* a wait raises (:meth:`Wait.check`) while work it counts is pending. Work queued while it
  waits (a tool call, a retry, from another thread) wakes it to check again.

Work queued from another thread with no known owner while the wait blocks counts: rxllm cannot
tell whose it is, and raising is better than a wait that may never end.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from contextvars import ContextVar

from .errors import EventLoopError

__all__ = ["Wait", "begin", "current_owner", "hold", "owning", "running_loop"]

_lock = threading.Lock()
_waits: dict[asyncio.AbstractEventLoop, list[Wait]] = {}  # loop -> blocking waits on its thread
_owner: ContextVar[object | None] = ContextVar("rxllm_loop_work_owner", default=None)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running on this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def current_owner() -> object | None:
    """On whose behalf work queued now on this thread is (a wait subscribing, or an :func:`owning` block)."""
    return _owner.get()


class _Owning:
    __slots__ = ("_owner", "_token")

    def __init__(self, owner: object | None) -> None:
        self._owner = owner

    def __enter__(self) -> None:
        self._token = _owner.set(self._owner)

    def __exit__(self, *exc_info: object) -> None:
        _owner.reset(self._token)


def owning(owner: object | None) -> contextlib.AbstractContextManager[None]:
    """While active on this thread, work queued (:func:`hold`) is ``owner``'s (``None``: unknown)."""
    return _Owning(owner)


def _released() -> None:
    return None


def hold(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Note one piece of rxllm work queued on ``loop``; call the result (idempotent) when it ends.

    A blocking wait on the loop's thread that counts it (see the module documentation) is woken,
    to raise :class:`EventLoopError`.
    """
    if not _waits.get(loop):  # no blocking wait on this loop's thread: nothing to count
        return _released
    owner = _owner.get()
    with _lock:
        counted = [wait for wait in _waits.get(loop, ()) if owner is None or owner is wait]
        for wait in counted:
            wait.pending += 1
    if not counted:
        return _released
    for wait in counted:
        wait.wake()
    released = [False]

    def release() -> None:
        with _lock:
            if released[0]:
                return
            released[0] = True
            for wait in counted:
                wait.pending -= 1

    return release


class Wait:
    """One blocking wait on the thread of a running loop: the work on that loop its stream has."""

    __slots__ = ("loop", "pending", "wake")

    def __init__(self, loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> None:
        self.loop = loop
        self.wake = wake  # makes the wait check again (when work it counts is queued)
        self.pending = 0  # pieces of work it counts, queued and not ended

    def subscribing(self) -> contextlib.AbstractContextManager[None]:
        """Around the wait's ``subscribe``: work queued meanwhile on this thread is the wait's own."""
        return owning(self)

    def check(self, what: str) -> None:
        """Raise :class:`EventLoopError` when the stream waited on has work pending on the loop
        this thread runs (and blocks): it could never run.

        Args:
            what: the blocking call, as the user wrote it (``"for ... in rxllm.iterate(...)"``).
        """
        if self.pending > 0:
            raise EventLoopError(
                f"{what} would block the running event loop of this thread, and the stream needs that loop "
                "to emit (an AsyncHttpTransport bound to it, or an async tool running on it): it would wait "
                "forever. Inside async code use 'async for item in stream' or 'await stream' "
                "(rxllm.aio.iterate / rxllm.aio.last) instead; or give the model a transport of its own "
                "(HttpTransport(), or AsyncHttpTransport() without loop=)"
            )

    def end(self) -> None:
        """The wait is over (idempotent): work queued from now on is not counted."""
        with _lock:
            waits = _waits.get(self.loop)
            if waits is None or self not in waits:
                return
            waits.remove(self)
            if not waits:
                del _waits[self.loop]


def begin(loop: asyncio.AbstractEventLoop | None, wake: Callable[[], None]) -> Wait | None:
    """Register a blocking wait on this thread, which runs ``loop`` (``None``: no loop, no wait).

    ``wake`` must make the wait check again. Call :meth:`Wait.end` when the wait is over.
    """
    if loop is None:
        return None
    wait = Wait(loop, wake)
    with _lock:
        _waits.setdefault(loop, []).append(wait)
    return wait
