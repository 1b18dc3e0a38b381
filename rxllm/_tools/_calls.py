"""Calling a tool for one function call of the model, and what the call answers: its outcome.

The outcomes are the same wherever a tool is called (the agent flow, :class:`rxllm.service.AiService`):
a tool that raises, whose arguments fail validation, that completes without a result, that returns
something that is not JSON, or that the model named but the caller does not have, does not fail
anything. Its :class:`~rxllm.FunctionResponse` is ``{"error": "<message>"}`` so the model can
recover. A result of None answers ``{}`` (ADK Java's ``FunctionTool``); another result that is
not a dict is wrapped as ``{"result": value}``, as ADK does. A result JSON
cannot carry (``NaN``, an int past the encoder's limit, an arbitrary object) is such an error
too: it is never stored or sent. A call that runs past its timeout answers
``{"error": "tool ... did not answer within its timeout of N s"}``.

>>> from rxllm import FunctionCall
>>> from rxllm.agents import FunctionTool, ToolContext
>>> from rxllm._tools import call_tool
>>> def get_order(order_id: str) -> dict[str, str]:
...     '''Look an order up.'''
...     return {"status": "shipped"}
>>> tools = {"get_order": FunctionTool(get_order)}
>>> call = FunctionCall(id="call_1", name="get_order", args={"order_id": "A17"})
>>> call_tool(tools, call, ToolContext.standalone(function_call_id=call.id)).run().response.response
{'status': 'shipped'}
>>> unknown = FunctionCall(id="call_2", name="cancel_order", args={})
>>> call_tool(tools, unknown, ToolContext.standalone()).run().error_message
"tool 'cancel_order' is not available (available tools: get_order)"
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import reactivex
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable

from .._core import prevalidated
from .._core.errors import ToolError
from .._core.redact import redact_secrets
from .._core.types import FunctionCall, FunctionResponse
from .._rx.direct import NO_DISPOSAL, Direct, emit_now, tap_next
from .._telemetry._environ import EnvVar
from .._telemetry.otel import TracedScope, otel, record_tool_result, tool_attributes, traced
from ._context import ToolContext
from ._execution import _NO_RUNTIME, ToolRuntime, start_tool
from ._json_safe import jsonable, plain_json_within
from ._tool import BaseTool, ToolResult

__all__ = ["ExecuteTool", "ToolCallOutcome", "call_tool", "call_tool_then"]

ExecuteTool = Callable[[BaseTool, dict[str, Any], ToolContext], reactivex.Observable[ToolResult]]
"""How a tool is executed: ``(tool, args, context)`` to an Observable of its result.

:func:`call_tool` uses :func:`~rxllm._tools._execution.execute_tool` by default; a runtime
passes a wrapped one to add hooks (callbacks before and after a tool, tracing spans) around it.
"""


@dataclass(frozen=True, slots=True)
class ToolCallOutcome:
    """What one tool call answered.

    Attributes:
        response: what goes back to the model: the tool's result, or ``{"error": error_message}``.
        error_message: why the call failed; None when it succeeded.
        error: the exception behind the failure, when there is one (for the log).
    """

    response: FunctionResponse
    error_message: str | None = None
    error: BaseException | None = None

    @property
    def failed(self) -> bool:
        """Whether the tool failed (its response is an error for the model)."""
        return self.error_message is not None

    def log_failure(self, logger: logging.Logger, where: str = "") -> None:
        """Log a failed call at WARNING, its error's traceback included (``where`` starts the message).

        Nothing is logged for a call that succeeded.
        """
        if self.error_message is not None:
            logger.warning(
                "%stool call %r (id %s) answered with an error: %s",
                where,
                self.response.name,
                self.response.id,
                self.error_message,
                exc_info=self.error,
            )


def _failure(call: FunctionCall, message: str, error: BaseException | None) -> ToolCallOutcome:
    message = redact_secrets(message)  # a tool's error may quote a key; the model and the store get it
    return ToolCallOutcome(FunctionResponse(id=call.id, name=call.name, response={"error": message}), message, error)


def call_tool(
    tools_by_name: Mapping[str, BaseTool],
    call: FunctionCall,
    tool_context: ToolContext,
    *,
    runtime: ToolRuntime | None = None,
    execute: ExecuteTool | None = None,
) -> reactivex.Observable[ToolCallOutcome]:
    """Run ``call`` with its tool: a cold Observable of exactly one :class:`ToolCallOutcome`.

    Every failure of the tool (any exception, ``SystemExit`` included) is an outcome with an
    error result for the model. The one failure of the Observable is a tool that raised
    ``KeyboardInterrupt``: it fails with :class:`~rxllm.ToolError` (chaining it), which ends the run.

    Subscribing starts the tool through ``execute`` (by default
    :func:`~rxllm._tools._execution.execute_tool` with ``runtime``: synchronous tools on the
    worker pool, ``async def`` ones on the runtime's loop, with the timeout). The outcome is
    emitted on the thread the result arrived on. Disposing abandons the result and cancels what
    can be cancelled (see ``execute_tool``).

    Args:
        tools_by_name: the tools the caller has, by the name the model calls them.
        call: the model's call, with its whole arguments.
        tool_context: what the tool gets as its ``tool_context``.
        runtime: where tools run and their default timeout (``ToolRuntime()`` when None).
        execute: how the tool is executed; wraps of :func:`execute_tool` add hooks around it.
    """
    tool = tools_by_name.get(call.name)
    if otel() is None:
        return _call(tool, tools_by_name, call, tool_context, runtime, execute)

    def in_span(scope: TracedScope | None) -> reactivex.Observable[ToolCallOutcome]:
        def record(outcome: ToolCallOutcome) -> None:
            if scope is not None:
                record_tool_result(scope, outcome.response, outcome.error_message, outcome.error)

        return tap_next(_call(tool, tools_by_name, call, tool_context, runtime, execute), record)

    description = tool.description if tool is not None else None
    return traced(in_span, f"execute_tool {call.name}", tool_attributes(call, description))


def call_tool_then(
    tools_by_name: Mapping[str, BaseTool],
    call: FunctionCall,
    tool_context: ToolContext,
    then: Callable[[ToolCallOutcome], None],
    fail: Callable[[Exception], None],
    *,
    runtime: ToolRuntime | None = None,
) -> rx_abc.DisposableBase:
    """What subscribing :func:`call_tool` (no ``execute``) does when telemetry is off (``otel()`` is
    None: no span), with no Observable in between: starts the tool now and hands its outcome to
    ``then`` (on the thread the result arrived on, at most once), or the :class:`~rxllm.ToolError`
    the Observable would fail with to ``fail``. Disposing what this returns is disposing that
    subscription: the result is dropped, what can be cancelled is (see ``execute_tool``)."""
    return _start(tools_by_name.get(call.name), tools_by_name, call, tool_context, runtime, None, None, then, fail)


def _call(
    tool: BaseTool | None,
    tools_by_name: Mapping[str, BaseTool],
    call: FunctionCall,
    tool_context: ToolContext,
    runtime: ToolRuntime | None,
    execute: ExecuteTool | None,
) -> reactivex.Observable[ToolCallOutcome]:
    """The outcome of ``call``: ``execute``'s, else :func:`execute_tool`'s with ``runtime`` (started
    without an Observable of its own in between: :func:`start_tool` delivers to the outcome)."""
    if tool is None:
        return emit_now(_unavailable(call, tools_by_name))

    def subscribe(
        observer: rx_abc.ObserverBase[ToolCallOutcome], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        def emit(outcome: ToolCallOutcome) -> None:
            observer.on_next(outcome)
            observer.on_completed()

        return _start(tool, tools_by_name, call, tool_context, runtime, execute, scheduler, emit, observer.on_error)

    return Direct(subscribe)


def _unavailable(call: FunctionCall, tools_by_name: Mapping[str, BaseTool]) -> ToolCallOutcome:
    known = ", ".join(sorted(tools_by_name)) or "none"
    return _failure(call, f"tool {call.name!r} is not available (available tools: {known})", None)


def _start(
    tool: BaseTool | None,
    tools_by_name: Mapping[str, BaseTool],
    call: FunctionCall,
    tool_context: ToolContext,
    runtime: ToolRuntime | None,
    execute: ExecuteTool | None,
    scheduler: rx_abc.SchedulerBase | None,
    emit: Callable[[ToolCallOutcome], None],
    fail: Callable[[Exception], None],
) -> rx_abc.DisposableBase:
    """Start ``call`` (what subscribing :func:`_call`'s Observable does): its one outcome to ``emit``, or
    the error that ends the run to ``fail``."""
    if tool is None:
        emit(_unavailable(call, tools_by_name))
        return NO_DISPOSAL
    name = tool.name

    def outcome_of(results: list[Any]) -> ToolCallOutcome:
        if not results:
            return _failure(call, f"tool {name!r} completed without a result", None)
        result = results[-1]
        if result is None:  # nothing to answer: an empty map, as ADK Java's FunctionTool
            result = {}
        elif not isinstance(result, dict):
            result = {"result": result}
        cap = max_tool_result_bytes()
        if plain_json_within(result, cap):  # the usual result: JSON's own types, within the cap
            converted = _copied(result)
            if converted is not None:
                return ToolCallOutcome(_response(call, converted))
        if _larger_than(result, cap):  # before any copy: a huge result is never converted, stored or sent
            return _failure(call, f"tool {name!r} returned a result larger than {cap} bytes, the cap on a tool "
                            "result (RXLLM_MAX_TOOL_RESULT_BYTES): return less, e.g. a summary or a page", None)
        converted, problem = jsonable(result)
        if problem is not None:
            return _failure(call, f"tool {name!r} returned a value that is not JSON: {problem}", None)
        if converted is not result and _larger_than(converted, cap):  # a model or object that grew when converted
            return _failure(call, f"tool {name!r} returned a result larger than {cap} bytes, the cap on a tool "
                            "result (RXLLM_MAX_TOOL_RESULT_BYTES): return less, e.g. a summary or a page", None)
        try:
            return ToolCallOutcome(FunctionResponse(id=call.id, name=call.name, response=converted))
        except ValidationError as exc:  # cannot happen for a checked value; never let it escape
            return _failure(call, f"tool {name!r} returned a value that is not JSON: {exc}", exc)

    def interrupted(error: BaseException) -> ToolError | None:
        """A :class:`ToolError` that ends the run when the tool raised ``KeyboardInterrupt``, else None."""
        cause = error if isinstance(error, KeyboardInterrupt) else error.__cause__
        if not isinstance(cause, KeyboardInterrupt):
            return None
        stop = ToolError(f"tool {name!r} raised KeyboardInterrupt: the run is stopped")
        stop.__cause__ = cause
        return stop

    def recover(error: Exception) -> ToolCallOutcome:
        if isinstance(error, ToolError):
            return _failure(call, str(error), error)
        return _failure(call, f"tool {name!r} failed with {type(error).__name__}: {error}", error)

    results: list[Any] = []

    def on_error(error: Exception) -> None:
        stop = interrupted(error)
        if stop is not None:
            fail(stop)
            return
        emit(recover(error))

    def on_completed() -> None:
        try:
            outcome = outcome_of(results)
        except Exception as exc:
            outcome = recover(exc)
        emit(outcome)

    def delivered(result: ToolResult | Exception) -> None:  # execute_tool's one item and completion, or error
        if isinstance(result, Exception):
            on_error(result)
        else:
            results.append(result)
            on_completed()

    try:
        if execute is None:
            return start_tool(tool, dict(call.args), tool_context, runtime or _NO_RUNTIME, delivered)
        source = execute(tool, dict(call.args), tool_context)
        return source.subscribe(results.append, on_error, on_completed, scheduler=scheduler)
    except BaseException as exc:  # a custom ``execute`` too: the call ends (see rxllm._tools._execution)
        on_error(exc if isinstance(exc, Exception) else _as_tool_error(name, exc))
        return Disposable()


def _copied(result: dict[str, Any]) -> dict[str, Any] | None:
    """What :func:`jsonable` converts ``result`` to, when it converts (None: the general path says why not)."""
    try:
        converted: dict[str, Any] = to_jsonable_python(result)
    except (PydanticSerializationError, ValueError, TypeError, RecursionError):
        return None
    return converted


_RESPONSE_TEMPLATE = prevalidated.template(FunctionResponse, frozenset({"id", "name", "response"}))


def _response(call: FunctionCall, response: dict[str, Any]) -> FunctionResponse:
    """``FunctionResponse(id=call.id, name=call.name, response=response)`` for a ``response`` of JSON's own
    types (:func:`plain_json_within`, freshly converted), without validating what is valid already."""
    call_id, name = call.id, call.name
    if (call_id is None or type(call_id) is str) and type(name) is str:
        return prevalidated.from_template(
            FunctionResponse, _RESPONSE_TEMPLATE, {"id": call_id, "name": name, "response": response}
        )
    return FunctionResponse(id=call_id, name=name, response=response)


def _as_tool_error(name: str, error: BaseException) -> ToolError:
    mapped = ToolError(f"tool {name!r} raised {type(error).__name__}: {error}")
    mapped.__cause__ = error
    return mapped


DEFAULT_MAX_TOOL_RESULT_BYTES = 4 * 1024 * 1024
_MAX_TOOL_RESULT_BYTES_ENV = EnvVar("RXLLM_MAX_TOOL_RESULT_BYTES")
"""The cap on one tool result (about its JSON size), unless ``RXLLM_MAX_TOOL_RESULT_BYTES`` says otherwise."""


def max_tool_result_bytes() -> int:
    """The cap on one tool result: ``RXLLM_MAX_TOOL_RESULT_BYTES`` (read at each call), else 4 MiB."""
    raw = _MAX_TOOL_RESULT_BYTES_ENV.get()  # (os.environ.get, without its KeyError when unset)
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value > 0:
            return value
    return DEFAULT_MAX_TOOL_RESULT_BYTES


def _larger_than(value: Any, cap: int) -> bool:
    """Whether ``value`` (JSON-like) holds more than ``cap`` bytes of text, counted as it is walked:
    it stops as soon as the cap is passed, so a gigabyte result costs no copy. Strings count one
    byte a character (a lower bound of their UTF-8), other leaves 8, containers 2 plus their items."""
    total = 0
    stack = [value]
    seen: set[int] = set()  # a cycle is left to the JSON check, which names it
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes | bytearray):
            total += len(item) + 2
        elif isinstance(item, dict | list | tuple) and id(item) in seen:
            return False
        elif isinstance(item, dict):
            seen.add(id(item))
            total += 2 + len(item)
            for key, inner in item.items():
                stack.append(key)
                stack.append(inner)
        elif isinstance(item, list | tuple):
            seen.add(id(item))
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += 8
        if total > cap:
            return True
    return False
