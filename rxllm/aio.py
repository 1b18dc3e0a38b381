"""asyncio front door: ``await`` an Observable's last item, ``async for`` over its items.

Every Observable rxllm's public API returns is an :class:`AwaitableObservable`, so from a
running loop (``asyncio.run``, uvicorn/FastAPI, debug mode too) ``await obs`` gives its last item
(a model call's final response) and ``async for x in obs`` each item as soon as it is emitted.
``.pipe(...)`` keeps it an :class:`AwaitableObservable`, whatever operators the chain applies.
For any other Observable (reactivex's own ``__await__`` hangs when items come from another
thread), :func:`last` and :func:`iterate` work whatever thread it emits on.

Each notification reaches the awaiting loop through ``loop.call_soon_threadsafe``: no polling, no
added latency. Leaving early (``break``, an exception, task cancellation, ``asyncio.timeout``)
disposes the subscription, which closes rxllm's connection at once. Errors arrive as the stream
emitted them (rxllm's streams emit :class:`~rxllm.RxLlmError` subclasses). :func:`iterate`
buffers between the emitting thread and the loop: at most ``max_buffer`` items; a full buffer makes a threaded
emitter wait (backpressure down to TCP) and fails a stream emitting on another event loop with
:class:`~rxllm.BufferOverflowError` (see :func:`iterate`). An ``await`` or ``async for`` with no
asyncio loop running on the thread raises :class:`~rxllm.EventLoopError` at once, as does a
blocking call (``for`` over ``rxllm.iterate``, ``.run()``) on a loop's thread that the stream
itself needs.

For code that returns Observables to users (rxllm's own modules, your session store or
provider): wrap each public return value with :func:`awaitable` (or :class:`MaybeObservable` for
"at most one item, none is an answer"), so ``await`` and ``async for`` work on it too. The
wrapper adds nothing per item: subscribing to it subscribes the wrapped Observable.

>>> import asyncio
>>> import reactivex
>>> from reactivex import operators as ops
>>> import rxllm.aio
>>> async def main():
...     doubled = reactivex.of(1, 2, 3).pipe(ops.map(lambda x: 2 * x))
...     return await rxllm.aio.last(doubled), [x async for x in rxllm.aio.iterate(doubled)]
>>> asyncio.run(main())
(6, [2, 4, 6])
"""

from ._core.public import publish as _publish
from ._rx.aio import (
    DEFAULT_MAX_BUFFER,
    AwaitableObservable,
    MaybeObservable,
    ObservableIterator,
    awaitable,
    iterate,
    last,
)

__all__ = [
    "AwaitableObservable",
    "DEFAULT_MAX_BUFFER",
    "MaybeObservable",
    "ObservableIterator",
    "awaitable",
    "iterate",
    "last",
]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
