"""Which asyncio loops rxllm has work queued on, so that a blocking wait that could never end
fails at once instead of hanging.

A blocking wait (``for`` over ``rxllm.iterate``, ``model.stream()``, ``.run()``) on the thread
of a running event loop stops that loop until the wait ends. When the stream needs that very loop
(an ``AsyncHttpTransport`` bound to it, an ``async def`` tool running there), the wait would
never end. Whatever queues rxllm work on a loop calls :func:`hold` until the work ends; a
blocking wait calls :func:`check_wait` before it waits and runs inside :func:`waiting`, so work
queued on its loop while it waits (a retry, a tool call) wakes it to raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator

from .errors import EventLoopError

__all__ = ["check_wait", "hold", "running_loop", "waiting"]

_lock = threading.Lock()
_work: dict[asyncio.AbstractEventLoop, int] = {}  # loop -> pieces of rxllm work queued or running on it
_waiters: dict[asyncio.AbstractEventLoop, list[Callable[[], None]]] = {}  # loop -> wakers of blocked waits


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running on this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def hold(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Note one piece of rxllm work queued on ``loop``; call the result (idempotent) when it ends.

    A blocking wait on the loop's thread in progress is woken, to raise :class:`EventLoopError`.
    """
    with _lock:
        _work[loop] = _work.get(loop, 0) + 1
        wakers = list(_waiters.get(loop, ()))
    for wake in wakers:
        wake()
    released = [False]

    def release() -> None:
        with _lock:
            if released[0]:
                return
            released[0] = True
            left = _work[loop] - 1
            if left:
                _work[loop] = left
            else:
                del _work[loop]

    return release


def check_wait(loop: asyncio.AbstractEventLoop | None, what: str) -> None:
    """Raise :class:`EventLoopError` when a blocking wait on this thread (which runs ``loop``)
    would wait for work queued on ``loop`` itself: it could never run.

    Args:
        loop: the loop running on this thread (:func:`running_loop`); ``None`` never raises.
        what: the blocking call, as the user wrote it (``"for ... in rxllm.iterate(...)"``).
    """
    if loop is None:
        return
    with _lock:
        busy = _work.get(loop, 0) > 0
    if busy:
        raise EventLoopError(
            f"{what} would block the running event loop of this thread, and the stream needs that loop "
            "to emit (an AsyncHttpTransport bound to it, or an async tool running on it): it would wait "
            "forever. Inside async code use 'async for item in stream' or 'await stream' "
            "(rxllm.aio.iterate / rxllm.aio.last) instead; or give the model a transport of its own "
            "(HttpTransport(), or AsyncHttpTransport() without loop=)"
        )


@contextlib.contextmanager
def waiting(loop: asyncio.AbstractEventLoop | None, wake: Callable[[], None]) -> Iterator[None]:
    """While active, work queued on ``loop`` calls ``wake`` (which must make the wait re-check)."""
    if loop is None:
        yield
        return
    with _lock:
        _waiters.setdefault(loop, []).append(wake)
    try:
        yield
    finally:
        with _lock:
            wakers = _waiters[loop]
            wakers.remove(wake)
            if not wakers:
                del _waiters[loop]
