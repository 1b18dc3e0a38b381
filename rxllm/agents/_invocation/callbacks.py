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

The runtime calls every hook with its arguments in one order (ADK Java's, which ADK Python's
parameter lists follow). A hook written for ADK Python with keyword-only parameters
(``def before_model(*, callback_context, llm_request)``) is called with ADK Python's keyword
names instead: :func:`keyword_adapter` inspects its signature once, when it is registered (an
agent's callback argument, a plugin class's method), and the call itself inspects nothing.
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

__all__ = [
    "AGENT_HOOK_PARAMETERS",
    "PLUGIN_HOOK_PARAMETERS",
    "as_callbacks",
    "callback_chain",
    "keyword_adapter",
    "resolve_answer",
]

T = TypeVar("T")

Call = Callable[[], object]
"""One callback with its arguments bound: calling it runs the callback."""


AGENT_HOOK_PARAMETERS: dict[str, tuple[str, ...]] = {
    "before_agent_callback": ("callback_context",),
    "after_agent_callback": ("callback_context",),
    "before_model_callback": ("callback_context", "llm_request"),
    "after_model_callback": ("callback_context", "llm_response"),
    "on_model_error_callback": ("callback_context", "llm_request", "error"),
    "before_tool_callback": ("tool", "args", "tool_context"),
    "after_tool_callback": ("tool", "args", "tool_context", "tool_response"),
    "on_tool_error_callback": ("tool", "args", "tool_context", "error"),
}
"""An agent's callbacks: their arguments in the order they are passed, by ADK Python's keyword names."""

PLUGIN_HOOK_PARAMETERS: dict[str, tuple[str, ...]] = {
    "on_user_message_callback": ("invocation_context", "user_message"),
    "before_run_callback": ("invocation_context",),
    "on_event_callback": ("invocation_context", "event"),
    "after_run_callback": ("invocation_context",),
    "before_agent_callback": ("agent", "callback_context"),
    "after_agent_callback": ("agent", "callback_context"),
    "before_model_callback": ("callback_context", "llm_request"),
    "after_model_callback": ("callback_context", "llm_response"),
    "on_model_error_callback": ("callback_context", "llm_request", "error"),
    "before_tool_callback": ("tool", "tool_args", "tool_context"),
    "after_tool_callback": ("tool", "tool_args", "tool_context", "result"),
    "on_tool_error_callback": ("tool", "tool_args", "tool_context", "error"),
}
"""A plugin's hooks (after ``self``): their arguments in order, by ADK Python's ``BasePlugin`` keyword names."""

_ADAPTED = "__rxllm_keyword_adapter__"


def keyword_adapter(function: Callable[..., Any], names: Sequence[str], kind: str) -> Callable[..., Any]:
    """``function`` callable with the hook's arguments passed positionally, in ``names``' order.

    A function that takes them positionally is returned as it is. One with keyword-only
    parameters (ADK Python's style, ``def hook(*, callback_context, llm_request)``) or only
    ``**kwargs`` is wrapped once: the wrapper passes the leading arguments the function takes
    positionally, and the others by their names (those it accepts). The signature is read here,
    never per call.

    Raises:
        ConfigurationError: a required keyword-only parameter is none of ``names``.

    >>> def before_model(*, callback_context, llm_request):
    ...     return (callback_context, llm_request)
    >>> keyword_adapter(before_model, ("callback_context", "llm_request"), "before_model_callback")("ctx", "req")
    ('ctx', 'req')
    >>> def positional(ctx, req):
    ...     return req
    >>> keyword_adapter(positional, ("callback_context", "llm_request"), "before_model_callback") is positional
    True
    """
    if getattr(function, _ADAPTED, False):
        return function
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or an object without a readable signature: call it positionally
        return function
    parameters = list(signature.parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    keyword_only = {p.name: p for p in parameters if p.kind is p.KEYWORD_ONLY}
    varkw = any(p.kind is p.VAR_KEYWORD for p in parameters)
    if not keyword_only and (positional or varargs or not varkw):
        return function
    known = set(names)
    for parameter in keyword_only.values():
        if parameter.name not in known and parameter.default is parameter.empty:
            name = getattr(function, "__qualname__", None) or type(function).__name__
            raise ConfigurationError(
                f"{kind} {name!r} has the keyword-only parameter {parameter.name!r}; a {kind} is called with "
                f"{', '.join(names)}"
            )
    count = len(names) if varargs else min(len(positional), len(names))
    by_name = tuple(
        (index, name) for index, name in enumerate(names) if index >= count and (varkw or name in keyword_only)
    )

    def adapted(*args: Any) -> Any:
        return function(*args[:count], **{name: args[index] for index, name in by_name})

    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        if hasattr(function, attribute):
            setattr(adapted, attribute, getattr(function, attribute))
    setattr(adapted, _ADAPTED, True)
    return adapted


def as_callbacks(value: Callable[..., Any] | Sequence[Callable[..., Any]] | None, kind: str) -> tuple[Any, ...]:
    """Normalize a callback argument (one callable, several, or None) to a tuple.

    A callback written with ADK Python's keyword-only parameters is wrapped here, once
    (:func:`keyword_adapter`, with :data:`AGENT_HOOK_PARAMETERS` of ``kind``)."""
    if value is None:
        return ()
    callbacks = (value,) if callable(value) else tuple(value)
    for callback in callbacks:
        if not callable(callback):
            raise ConfigurationError(f"{kind} must be callables, got {type(callback).__name__}")
    names = AGENT_HOOK_PARAMETERS.get(kind)
    if names is None:
        return callbacks
    return tuple(keyword_adapter(callback, names, kind) for callback in callbacks)


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
