"""``BasePlugin``: hooks the runner calls for every agent, model and tool of a run (ADK's ``plugins/BasePlugin.java``).

A plugin is given to the runner (``Runner(..., plugins=[...])``) and applies to every agent of the
tree. Each hook may return None (go on), an answer (see each hook), or an Observable of zero or one
answer (ADK Java's ``Maybe``), or be an ``async def``. Plugins run in the order given, before the
agents' own callbacks; the first answer wins and the rest (plugins and callbacks) are skipped.

>>> from rxllm import Content, Part
>>> class Polite(BasePlugin):
...     def on_user_message_callback(self, invocation_context, user_message):
...         return Content(role="user", parts=(*user_message.parts, Part.from_text("Please.")))
>>> Polite("polite").name
'polite'
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import reactivex
from reactivex import operators as ops

from ..._core.errors import ConfigurationError
from ..._core.types import Content, LlmRequest, LlmResponse
from ..._rx.direct import concat_map_now, concat_now, emit_now
from .._sessions.event import Event
from .callbacks import Call, callback_chain
from .context import CallbackContext, InvocationContext, ToolContext

if TYPE_CHECKING:
    from ..._tools import BaseTool
    from .agent import BaseAgent

__all__ = ["BasePlugin", "after_run", "before_run", "on_event", "on_user_message"]


class BasePlugin:
    """A plugin: override the hooks you need; every hook answers None by default.

    Args:
        name: the plugin's name (for error messages and logs).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def on_user_message_callback(self, invocation_context: InvocationContext, user_message: Content) -> object:
        """Before the user's message is stored: answer a :class:`~rxllm.Content` to store that instead."""
        return None

    def before_run_callback(self, invocation_context: InvocationContext) -> object:
        """Before the agent runs: answer a :class:`~rxllm.Content` to skip the run; it is emitted as the
        run's only event (authored ``"model"``, not stored, as in ADK)."""
        return None

    def on_event_callback(self, invocation_context: InvocationContext, event: Event) -> object:
        """For every event the run emits (after it was stored): answer an :class:`Event` to emit instead."""
        return None

    def after_run_callback(self, invocation_context: InvocationContext) -> object:
        """After the run's last event; an Observable or awaitable returned is waited for. No answer."""
        return None

    def before_agent_callback(self, agent: BaseAgent, callback_context: CallbackContext) -> object:
        """Before each agent: answer a :class:`~rxllm.Content` to skip the agent (see ``AgentCallback``)."""
        return None

    def after_agent_callback(self, agent: BaseAgent, callback_context: CallbackContext) -> object:
        """After each agent: answer a :class:`~rxllm.Content` to add an event."""
        return None

    def before_model_callback(self, callback_context: CallbackContext, llm_request: LlmRequest) -> object:
        """Before each model call: answer an :class:`~rxllm.LlmResponse` to skip the call, or an
        :class:`~rxllm.LlmRequest` to replace the request."""
        return None

    def after_model_callback(self, callback_context: CallbackContext, llm_response: LlmResponse) -> object:
        """For each model response: answer an :class:`~rxllm.LlmResponse` to replace it."""
        return None

    def on_model_error_callback(
        self, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> object:
        """When a model call fails: answer an :class:`~rxllm.LlmResponse` to use instead of the error."""
        return None

    def before_tool_callback(self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext) -> object:
        """Before each tool call: answer a dict to use as the tool's result without calling it."""
        return None

    def after_tool_callback(
        self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> object:
        """After each tool call: answer a dict to replace the tool's result."""
        return None

    def on_tool_error_callback(
        self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> object:
        """When a tool fails: answer a dict to use as its result instead of the error response."""
        return None


def _content_answer(kind: str) -> Callable[[object], Content]:
    def accept(answer: object) -> Content:
        if isinstance(answer, Content):
            return answer
        raise ConfigurationError(f"{kind} returned {type(answer).__name__}; expected None or a Content")

    return accept


def on_user_message(ctx: InvocationContext, message: Content) -> reactivex.Observable[Content]:
    """The user message to store: the first plugin's replacement, else ``message``. Cold."""
    if not ctx.plugins:
        return emit_now(message)
    kind = "on_user_message_callback"
    calls: list[tuple[object, Call]] = [
        (p.on_user_message_callback, partial(p.on_user_message_callback, ctx, message)) for p in ctx.plugins
    ]
    return callback_chain(kind, "the runner's plugins", calls, _content_answer(kind), loop=ctx.tool_runtime.loop).pipe(
        ops.default_if_empty(message)
    )


def before_run(ctx: InvocationContext) -> reactivex.Observable[Event]:
    """The event replacing the run when a plugin's ``before_run_callback`` answers (authored
    ``"model"``, not stored, as ADK's runner); empty otherwise. Cold."""
    kind = "before_run_callback"
    calls: list[tuple[object, Call]] = [
        (p.before_run_callback, partial(p.before_run_callback, ctx)) for p in ctx.plugins
    ]

    def to_event(content: Content) -> Event:
        return Event(invocation_id=ctx.invocation_id, author="model", content=content)

    return callback_chain(kind, "the runner's plugins", calls, _content_answer(kind), loop=ctx.tool_runtime.loop).pipe(
        ops.map(to_event)
    )


def on_event(ctx: InvocationContext, events: reactivex.Observable[Event]) -> reactivex.Observable[Event]:
    """``events``, each replaced by the first plugin's ``on_event_callback`` answer (order kept)."""
    if not ctx.plugins:
        return events
    kind = "on_event_callback"

    def accept(answer: object) -> Event:
        if isinstance(answer, Event):
            return answer
        raise ConfigurationError(f"{kind} returned {type(answer).__name__}; expected None or an Event")

    def replace(event: Event) -> reactivex.Observable[Event]:
        calls: list[tuple[object, Call]] = [
            (p.on_event_callback, partial(p.on_event_callback, ctx, event)) for p in ctx.plugins
        ]
        return callback_chain(kind, "the runner's plugins", calls, accept, loop=ctx.tool_runtime.loop).pipe(
            ops.default_if_empty(event)
        )

    return concat_map_now(events, replace)


def after_run(ctx: InvocationContext) -> reactivex.Observable[Event]:
    """Every plugin's ``after_run_callback``, in order, each waited for; emits nothing. Cold."""
    kind = "after_run_callback"

    def ignore(_: object) -> None:
        return None

    def runs() -> Iterator[reactivex.Observable[Event]]:
        for plugin in ctx.plugins:
            calls: list[tuple[object, Call]] = [(plugin.after_run_callback, partial(plugin.after_run_callback, ctx))]
            yield callback_chain(kind, f"plugin {plugin.name!r}", calls, ignore, loop=ctx.tool_runtime.loop).pipe(
                ops.ignore_elements()
            )

    return concat_now(runs())
