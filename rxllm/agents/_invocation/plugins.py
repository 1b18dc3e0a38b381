"""The runner's plugin hooks (ADK's ``PluginManager``): ``on_user_message``, ``before_run``, ``on_event``,
``after_run``.

A plugin (:class:`~rxllm.agents.BasePlugin`, defined with the invocation context in ``.base``) is
given to the runner (``Runner(..., plugins=[...])``) and applies to every agent of the tree. Each
hook may return None (go on), an answer (see each hook), or an Observable of zero or one answer
(ADK Java's ``Maybe``), or be an ``async def``. Plugins run in the order given, before the agents'
own callbacks; the first answer wins and the rest (plugins and callbacks) are skipped. The agent,
model and tool hooks are called where those run (``.base``, the LLM flow); this module runs the
hooks around the whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import reactivex
from reactivex import operators as ops

from ..._core.errors import ConfigurationError
from ..._core.types import Content
from ..._rx.direct import concat_map_now, concat_now, emit_now
from .._sessions.event import Event
from .base import InvocationContext
from .callbacks import Call, callback_chain

__all__ = ["after_run", "before_run", "on_event", "on_user_message"]


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
