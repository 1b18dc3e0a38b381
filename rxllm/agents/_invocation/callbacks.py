"""Running callbacks the way ADK runs them: in order, until one answers.

A callback (or a plugin hook) returns one of:

- ``None``: no answer, the next callback runs (and then the step itself);
- a value: the answer (ADK's short-circuit: the step is skipped or its result replaced);
- an ``Observable`` of zero or one item (ADK Java's ``Maybe``): its first item is the answer,
  completing empty means no answer;
- an awaitable (an ``async def`` callback's coroutine): its result is the answer or ``None``.

Exceptions raised by a callback (or an Observable's error) fail the step with an
:class:`~rxllm.RxLlmError` that names the callback; an ``RxLlmError`` is passed through as is.

``async def`` callbacks run where ``async def`` tools run: on the loop the run was subscribed
from, else on rxllm's tool loop. Plugins run before an agent's own callbacks (``callback_chain``
takes them first), as in ADK's ``PluginManager``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from ..._core.errors import ConfigurationError, RxLlmError
from ..._rx.direct import emit_now, nothing_now
from ..._tools import default_tool_scheduler, running_loop
from ..._tools._loops import coroutine_observable, tool_loop

__all__ = ["as_callbacks", "callback_chain", "resolve_answer"]

T = TypeVar("T")

Call = Callable[[], object]
"""One callback with its arguments bound: calling it runs the callback."""


def as_callbacks(value: Callable[..., Any] | Sequence[Callable[..., Any]] | None, kind: str) -> tuple[Any, ...]:
    """Normalize a callback argument (one callable, several, or None) to a tuple."""
    if value is None:
        return ()
    if callable(value):
        return (value,)
    callbacks = tuple(value)
    for callback in callbacks:
        if not callable(callback):
            raise ConfigurationError(f"{kind} must be callables, got {type(callback).__name__}")
    return callbacks


def _from_awaitable(
    awaitable: Awaitable[object], loop: asyncio.AbstractEventLoop | None
) -> reactivex.Observable[object]:
    async def run() -> object:
        return await awaitable

    def drop_none(value: object) -> reactivex.Observable[object]:
        return nothing_now() if value is None else emit_now(value)

    return coroutine_observable(run(), loop if loop is not None else tool_loop()).pipe(ops.flat_map(drop_none))


def resolve_answer(result: object, loop: asyncio.AbstractEventLoop | None = None) -> reactivex.Observable[object]:
    """A callback's return value as an Observable of zero or one answer (see the module docstring).

    An awaitable runs on ``loop`` (the loop the run was subscribed from, ``ToolRuntime.loop``),
    else on rxllm's own tool loop, as ``async def`` tools do (``rxllm._tools._loops``)."""
    if result is None:
        return nothing_now()
    if isinstance(result, reactivex.Observable):
        return cast(reactivex.Observable[object], result)
    if inspect.isawaitable(result):
        return _from_awaitable(result, loop)
    return emit_now(result)


def _named_error(kind: str, owner: str, callback: object, error: Exception) -> Exception:
    if isinstance(error, RxLlmError):
        return error
    name = getattr(callback, "__name__", None) or type(callback).__name__
    failure = RxLlmError(f"{kind} {name!r} of {owner} raised {type(error).__name__}: {error}")
    failure.__cause__ = error
    return failure


def callback_chain(
    kind: str,
    owner: str,
    calls: Sequence[tuple[object, Call]],
    accept: Callable[[object], T | None],
    *,
    loop: asyncio.AbstractEventLoop | None = None,
) -> reactivex.Observable[T]:
    """Run ``calls`` in order until one answers; emit ``accept(answer)`` (if not None) and complete.

    Args:
        kind: what the callbacks are, for error messages (``"before_tool_callback"``).
        owner: whose they are (``"agent 'writer'"``).
        calls: ``(callback, call)`` pairs: ``call()`` runs the callback with its arguments.
        accept: checks an answer and turns it into the chain's result; returning None means "not
            an answer, go on" (e.g. a before-model callback that replaced the request). Raise
            :class:`~rxllm.ConfigurationError` for an answer of the wrong type.
        loop: where ``async def`` callbacks run (see :func:`resolve_answer`).

    Cold: subscribing calls the first callback; a callback is called only when the ones before it
    did not answer. Synchronous callbacks answer during ``subscribe``, unless the subscribing
    thread runs an asyncio event loop: then the chain runs on the tool pool (callbacks never run
    on a loop, see ``rxllm._tools._execution``). Disposing stops the chain
    (an awaiting callback's task is cancelled).
    """

    def subscribe(
        observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        current: list[SingleAssignmentDisposable] = []
        state = {"disposed": False}

        def run(index: int) -> None:
            while index < len(calls) and not state["disposed"]:
                callback, call = calls[index]
                try:
                    result = call()
                except Exception as exc:
                    observer.on_error(_named_error(kind, owner, callback, exc))
                    return
                if result is None:
                    index += 1
                    continue
                if not isinstance(result, reactivex.Observable) and not inspect.isawaitable(result):
                    if not deliver(callback, result):
                        index += 1
                        continue
                    return
                subscribe_to(index, callback, resolve_answer(result, loop))
                return
            if not state["disposed"]:
                observer.on_completed()

        def deliver(callback: object, answer: object) -> bool:
            try:
                accepted = accept(answer)
            except Exception as exc:
                observer.on_error(_named_error(kind, owner, callback, exc))
                return True
            if accepted is None:
                return False
            observer.on_next(accepted)
            observer.on_completed()
            return True

        def subscribe_to(index: int, callback: object, answers: reactivex.Observable[object]) -> None:
            done = {"answered": False}
            subscription = SingleAssignmentDisposable()
            current.append(subscription)

            def on_next(answer: object) -> None:
                if done["answered"] or answer is None:
                    return
                done["answered"] = True
                subscription.dispose()
                if not deliver(callback, answer):
                    run(index + 1)

            def on_error(error: Exception) -> None:
                if not done["answered"]:
                    done["answered"] = True
                    observer.on_error(_named_error(kind, owner, callback, error))

            def on_completed() -> None:
                if not done["answered"]:
                    done["answered"] = True
                    run(index + 1)

            subscription.disposable = answers.subscribe(on_next, on_error, on_completed, scheduler=scheduler)

        if calls and running_loop() is not None:
            # Callbacks are user code: never on an event loop (an AsyncHttpTransport's loop serves
            # every stream of the transport). Off it, on the tool pool, as synchronous tools.
            hop = SingleAssignmentDisposable()
            current.append(hop)

            def start(_: rx_abc.SchedulerBase, __: Any = None) -> None:
                run(0)

            hop.disposable = default_tool_scheduler().schedule(start)
        else:
            run(0)

        def dispose() -> None:
            state["disposed"] = True
            for subscription in current:
                subscription.dispose()

        return Disposable(dispose)

    return reactivex.create(subscribe)
