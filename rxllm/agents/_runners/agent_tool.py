"""``AgentTool``: an agent used as a tool by another agent's model (ADK's ``tools/AgentTool.java``).

The model calls the tool with ``{"request": "..."}``; the agent runs on a fresh in-memory session
whose state is a copy of the caller's (the caller's plugins are not applied, ADK's default). Every
state change the agent makes flows back into the caller's state (deletions included), so it is
stored with the caller's function-response event. The tool's result is ``{"result": <the last
event's text>}``, or, when the agent is an ``LlmAgent`` with ``output_schema``, the validated
object. With ``skip_summarization`` the caller's turn ends with that result (no further model call).
"""

from __future__ import annotations

from typing import Any

import reactivex
from reactivex import operators as ops

from ..._core.errors import ConfigurationError, ToolError
from ..._core.types import Content, FunctionDeclaration, Part
from ..._tools import BaseTool, ToolContext, ToolResult
from .._agents.llm_agent import LlmAgent
from .._flows.output_schema import validate_output
from .._invocation.base import BaseAgent
from .._sessions.event import Event
from .._sessions.state import STATE_REMOVED
from .runner import InMemoryRunner

__all__ = ["AgentTool"]


class AgentTool(BaseTool):
    """An agent as a tool (see the module docstring).

    Args:
        agent: the agent to run. It runs as the root of its own run: give it no parent.
        skip_summarization: end the calling agent's turn with this tool's result.

    >>> from rxllm.agents import LlmAgent
    >>> from rxllm.testing import ScriptedLlm
    >>> tool = AgentTool(LlmAgent("translator", ScriptedLlm([]), description="Translates to French."))
    >>> declaration = tool.declaration()
    >>> declaration.name, declaration.description, declaration.parameters["required"]
    ('translator', 'Translates to French.', ['request'])
    """

    def __init__(self, agent: BaseAgent, *, skip_summarization: bool = False) -> None:
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"AgentTool needs a BaseAgent, got {type(agent).__name__}")
        super().__init__(name=agent.name, description=agent.description)
        self._agent = agent
        self._skip_summarization = skip_summarization

    @property
    def agent(self) -> BaseAgent:
        """The agent the tool runs."""
        return self._agent

    @property
    def skip_summarization(self) -> bool:
        """Whether the caller's turn ends with this tool's result."""
        return self._skip_summarization

    def declaration(self) -> FunctionDeclaration:
        """``{"request": string}``, required."""
        return FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters={"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]},
        )

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[ToolResult]:
        """Run the agent on ``args["request"]``; emit its output. Cold: subscribing starts the agent's
        run, disposing cancels it (its model call's connection is closed)."""
        if self._skip_summarization:
            tool_context.actions.skip_summarization = True
        request = args.get("request")
        if not isinstance(request, str):
            raise ToolError(f"agent tool {self.name!r} needs a string 'request' argument, got {args!r}")
        agent = self._agent

        def start(_: object) -> reactivex.Observable[ToolResult]:
            runner = InMemoryRunner(agent, app_name=tool_context.agent_name or "agent_tool")
            session = runner.session_service.create_session(
                runner.app_name, "tmp-user", state=tool_context.state.to_dict()
            ).run()
            message = Content(role="user", parts=(Part.from_text(request),))

            def flow_back(event: Event) -> None:
                for key, value in event.actions.state_delta.items():
                    if value == STATE_REMOVED:
                        if key in tool_context.state:
                            del tool_context.state[key]
                    else:
                        tool_context.state[key] = value

            def output(events: list[Event]) -> ToolResult:
                final = [e for e in events if not e.partial]
                if not final or final[-1].content is None:
                    return {}
                text = final[-1].text()
                if isinstance(agent, LlmAgent) and agent.output_schema is not None:
                    try:
                        validated = validate_output(agent.output_schema, text)
                    except ValueError as exc:
                        raise ToolError(
                            f"agent tool {self.name!r}: the reply does not match its output_schema: {exc}"
                        ) from exc
                    return validated if isinstance(validated, dict) else {"result": validated}
                return {"result": text}

            return runner.run_async(session.user_id, session.id, message).pipe(
                ops.do_action(on_next=flow_back), ops.to_list(), ops.map(output)
            )

        return reactivex.defer(start)
