"""``AgentTool``: an agent used as a tool by another agent's model (ADK's ``tools/AgentTool.java``).

The model calls the tool with ``{"request": "..."}``, or, when the agent has an ``input_schema``,
with arguments of that schema (validated, then sent to the agent as its user message, JSON text).
The agent runs on a fresh in-memory session whose state is a copy of the caller's, without the
caller's plugins unless ``include_plugins`` (ADK Java's default and option). Every state change
the agent makes flows back into the caller's state (deletions included), so it is stored with the
caller's function-response event. The tool's result is ``{"result": <the last event's text>}``,
or, when the agent has an ``output_schema``, the validated object. With ``skip_summarization`` the
caller's turn ends with that result (no further model call). The agent's toolsets share the
calling runner's sessions (an MCP toolset's per-runner session); called outside a runner, the
sessions they open close when the call ends.

For a workflow agent (``SequentialAgent``...), the input schema is its first ``LlmAgent``'s (down
the first sub-agents) and the output schema its last's (down the last sub-agents), as ADK Java's
``AgentTool.getInputSchema`` / ``getOutputSchema``.
"""

from __future__ import annotations

import json
from typing import Any, cast

import reactivex
from pydantic import BaseModel, ValidationError
from reactivex import operators as ops

from ..._core.errors import ConfigurationError, ToolError
from ..._core.types import Content, FunctionDeclaration, Part
from ..._tools import BaseTool, ToolContext, ToolResult, describe_validation_error
from ..._tools._scope import closing_after
from ..._tools._tool import _strip_titles
from .._agents.llm_agent import LlmAgent
from .._flows.output_schema import validate_output
from .._invocation.base import BaseAgent, BasePlugin
from .._sessions.event import Event
from .._sessions.state import STATE_REMOVED
from .runner import InMemoryRunner

__all__ = ["AgentTool"]


class AgentTool(BaseTool):
    """An agent as a tool (see the module docstring).

    Args:
        agent: the agent to run. It runs as the root of its own run: give it no parent.
        skip_summarization: end the calling agent's turn with this tool's result.
        include_plugins: run the agent with the calling run's plugins (ADK Java's
            ``AgentTool.create(agent, skipSummarization, includePlugins)``); without, it runs
            with none.

    >>> from rxllm.agents import LlmAgent
    >>> from rxllm.testing import ScriptedLlm
    >>> tool = AgentTool(LlmAgent("translator", ScriptedLlm([]), description="Translates to French."))
    >>> declaration = tool.declaration()
    >>> declaration.name, declaration.description, declaration.parameters["required"]
    ('translator', 'Translates to French.', ['request'])
    """

    def __init__(self, agent: BaseAgent, *, skip_summarization: bool = False, include_plugins: bool = False) -> None:
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"AgentTool needs a BaseAgent, got {type(agent).__name__}")
        super().__init__(name=agent.name, description=agent.description)
        self._agent = agent
        self._skip_summarization = skip_summarization
        self._include_plugins = include_plugins

    @property
    def agent(self) -> BaseAgent:
        """The agent the tool runs."""
        return self._agent

    @property
    def skip_summarization(self) -> bool:
        """Whether the caller's turn ends with this tool's result."""
        return self._skip_summarization

    @property
    def include_plugins(self) -> bool:
        """Whether the agent runs with the calling run's plugins."""
        return self._include_plugins

    def declaration(self) -> FunctionDeclaration:
        """The agent's ``input_schema`` as parameters; without one ``{"request": string}``, required."""
        schema = _input_schema_of(self._agent)
        if schema is not None:
            parameters = _strip_titles(schema.model_json_schema(by_alias=True))
            return FunctionDeclaration(name=self.name, description=self.description, parameters=parameters)
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
        input_schema = _input_schema_of(self._agent)
        if input_schema is not None:
            try:
                input_schema.model_validate(args)
            except ValidationError as exc:
                raise ToolError(
                    f"invalid arguments for agent tool {self.name!r}: {describe_validation_error(exc)}"
                ) from exc
            request = json.dumps(args, separators=(",", ":"), ensure_ascii=False)  # Jackson's compact JSON
        else:
            given = args.get("request")
            if not isinstance(given, str):
                raise ToolError(f"agent tool {self.name!r} needs a string 'request' argument, got {args!r}")
            request = given
        agent = self._agent
        plugins = cast(tuple[BasePlugin, ...], tool_context._invocation_plugins) if self._include_plugins else ()

        def start(_: object) -> reactivex.Observable[ToolResult]:
            runner = InMemoryRunner(agent, app_name=tool_context.agent_name or "agent_tool", plugins=plugins)
            scopes = tool_context._toolset_scopes
            if scopes is not None:  # the agent's toolsets share the calling runner's sessions
                runner._toolset_scope = scopes.runner
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
                output_schema = _output_schema_of(agent)
                if output_schema is not None:
                    try:
                        validated = validate_output(output_schema, text)
                    except ValueError as exc:
                        raise ToolError(
                            f"agent tool {self.name!r}: the reply does not match its output_schema: {exc}"
                        ) from exc
                    return validated if isinstance(validated, dict) else {"result": validated}
                return {"result": text}

            run = runner.run_async(session.user_id, session.id, message).pipe(
                ops.do_action(on_next=flow_back), ops.to_list(), ops.map(output)
            )
            # called outside a runner: the sessions the agent's toolsets opened end with the call
            return run if scopes is not None else closing_after(run, runner._toolset_scope)

        return reactivex.defer(start)


def _input_schema_of(agent: BaseAgent) -> type[BaseModel] | None:
    """The input schema of the first ``LlmAgent`` down the first sub-agents (ADK Java's ``getInputSchema``)."""
    current = agent
    while not isinstance(current, LlmAgent):
        if not current.sub_agents:
            return None
        current = current.sub_agents[0]
    return current.input_schema


def _output_schema_of(agent: BaseAgent) -> type[BaseModel] | None:
    """The output schema of the first ``LlmAgent`` down the last sub-agents (ADK Java's ``getOutputSchema``)."""
    current = agent
    while not isinstance(current, LlmAgent):
        if not current.sub_agents:
            return None
        current = current.sub_agents[-1]
    return current.output_schema
