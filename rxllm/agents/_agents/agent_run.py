"""Before- and after-agent callbacks around an agent's run (ADK's ``BaseAgent.run`` / ``callCallback``).

Plugins' hooks run first, then the agent's own callbacks, until one answers (``_callbacks``).

- A before-agent answer (a :class:`~rxllm.Content`) replaces the agent's run: one event authored by
  the agent with that content (and the state the callbacks set) is stored and emitted, and the
  agent does not run.
- Without an answer, state the before callbacks set is stored in an event of its own (no content)
  before the agent runs, so the agent sees it.
- After the agent's events, the after-agent callbacks run the same way: an answer adds one
  event; state set without an answer is stored in an event of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import reactivex
from reactivex import operators as ops

from ..._core.errors import ConfigurationError
from ..._core.types import Content
from ..._rx.direct import nothing_now, then_now
from .._sessions.base import Session
from .._sessions.event import Event, EventActions
from .._sessions.state import State
from .callbacks import Call, callback_chain
from .context import CallbackContext, InvocationContext

if TYPE_CHECKING:
    from .agent import AgentCallback, BaseAgent

__all__ = ["run_with_agent_callbacks"]


def _content_answer(kind: str) -> Callable[[object], Content | None]:
    def accept(answer: object) -> Content | None:
        if isinstance(answer, Content):
            return answer if answer.role is not None else answer.model_copy(update={"role": "model"})
        raise ConfigurationError(f"{kind} returned {type(answer).__name__}; expected None or a Content")

    return accept


def _agent_step(
    agent: BaseAgent, ctx: InvocationContext, kind: str, callbacks: tuple[AgentCallback, ...], *, before: bool
) -> Callable[[list[bool]], reactivex.Observable[Event]]:
    """The Observable of one callback phase: at most one stored event; ``answered[0]`` tells whether one answered."""

    def phase(answered: list[bool]) -> reactivex.Observable[Event]:
        def with_session(session: Session) -> reactivex.Observable[Event]:
            state = State(session.state)
            callback_ctx = CallbackContext(ctx, state)
            calls: list[tuple[object, Call]] = []
            for plugin in ctx.plugins:
                hook = plugin.before_agent_callback if before else plugin.after_agent_callback
                calls.append((hook, partial(hook, agent, callback_ctx)))
            for callback in callbacks:
                calls.append((callback, partial(callback, callback_ctx)))

            def store(content: Content | None) -> reactivex.Observable[Event]:
                if content is None and not state.has_delta():
                    return nothing_now()
                answered[0] = content is not None
                event = Event(
                    invocation_id=ctx.invocation_id,
                    author=agent.name,
                    branch=ctx.branch,
                    content=content,
                    actions=EventActions(state_delta=state.take_delta()),
                )
                return ctx.append_event(event)

            def store_first(answers: list[Content]) -> reactivex.Observable[Event]:
                return store(answers[0] if answers else None)

            answers = callback_chain(
                kind, f"agent {agent.name!r}", calls, _content_answer(kind), loop=ctx.tool_runtime.loop
            )
            return answers.pipe(ops.to_list(), ops.flat_map(store_first))

        return ctx.session_now().pipe(ops.flat_map(with_session))

    return phase


def run_with_agent_callbacks(
    agent: BaseAgent, ctx: InvocationContext, run: Callable[[InvocationContext], reactivex.Observable[Event]]
) -> reactivex.Observable[Event]:
    """``run(ctx)`` between the before- and after-agent callbacks (see the module docstring). Cold."""
    before = _agent_step(agent, ctx, "before_agent_callback", agent.before_agent_callbacks, before=True)
    after = _agent_step(agent, ctx, "after_agent_callback", agent.after_agent_callbacks, before=False)

    def start(_: object) -> reactivex.Observable[Event]:
        answered = [False]

        def main() -> reactivex.Observable[Event]:
            if answered[0] or ctx.is_cancelled:
                ctx.end_invocation = answered[0]
                return nothing_now()
            return then_now(run(ctx), lambda: after([False]))

        return then_now(before(answered), main)

    return reactivex.defer(start)
