"""Built-in tools as tool entries: tools the provider runs itself, next to function tools.

ADK's ``GoogleSearchTool``, ``BuiltInCodeExecutionTool`` and ``UrlContextTool`` go into an agent's
``tools`` like any tool and add their :class:`~rxllm.Tool` entry to the request (in their
``processLlmRequest``). Here :class:`BuiltInTool` does the same for any built-in tool rxllm types
(Gemini's three, OpenAI Responses' ``web_search`` / ``file_search``, Anthropic's server tools);
:class:`GoogleSearchTool`, :class:`BuiltInCodeExecutionTool` and :class:`UrlContextTool` are ADK's
names for Gemini's. The provider maps the entry to its native tool, or refuses the request with a
:class:`~rxllm.ConfigurationError` naming the tool and the API that runs it (a built-in tool is
never dropped silently).

Where the entries go (:func:`tool_declarations`): where ADK Java's request ends up with them. Java
appends each built-in tool's entry when its turn comes and re-appends the one entry of function
declarations after every function tool, so that entry stands after every built-in tool listed
before the last function tool and before the ones listed after it.

>>> from rxllm.agents import FunctionTool, GoogleSearchTool
>>> def get_order(order_id: str) -> dict[str, str]:
...     '''Look an order up.'''
...     return {}
>>> declared = tool_declarations([GoogleSearchTool(), FunctionTool(get_order)])
>>> [(t.google_search is not None, [d.name for d in t.function_declarations]) for t in declared]
[(True, []), (False, ['get_order'])]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import reactivex

from .._core.errors import ConfigurationError, ToolError
from .._core.genai_types import GoogleSearch, ToolCodeExecution, UrlContext
from .._core.types import BUILT_IN_TOOLS, Tool
from .._rx.direct import fail_now
from ._context import ToolContext
from ._tool import BaseTool, ToolResult

__all__ = ["BuiltInCodeExecutionTool", "BuiltInTool", "GoogleSearchTool", "UrlContextTool", "tool_declarations"]

_DEFAULT_NAMES = {
    "google_search": "google_search",
    "code_execution": "code_execution",
    "url_context": "url_context",
    "openai_web_search": "web_search",
    "openai_file_search": "file_search",
}


class BuiltInTool(BaseTool):
    """A tool the provider runs itself, usable in ``LlmAgent(tools=[...])`` with function tools.

    Args:
        tool: the request's tool entry: a :class:`~rxllm.Tool` with exactly one built-in tool
            set (``Tool(google_search=GoogleSearch())``,
            ``Tool(openai_web_search=OpenAiWebSearch())``,
            ``Tool(anthropic_server_tool=AnthropicServerTool.web_search())``...) and no function
            declarations.
        name: the entry's name among the agent's tools; by default the built-in tool's
            (``google_search``, ``code_execution``, ``url_context``, ``web_search``,
            ``file_search``, or the Anthropic server tool's ``name``).

    The model never calls it as a function (the provider runs it inside the request), so it has
    no declaration; a call by its name anyway answers a :class:`~rxllm.ToolError` result.

    Raises:
        ConfigurationError: ``tool`` is not a ``Tool`` with exactly one built-in tool and no
            function declarations.
    """

    def __init__(self, tool: Tool, *, name: str | None = None) -> None:
        if not isinstance(tool, Tool):
            raise ConfigurationError(f"BuiltInTool needs a Tool, got {type(tool).__name__}")
        fields = [field for field in BUILT_IN_TOOLS if getattr(tool, field) is not None]
        if len(fields) != 1 or tool.function_declarations:
            raise ConfigurationError(
                "BuiltInTool needs a Tool with exactly one built-in tool and no function declarations "
                f"(one of {', '.join(BUILT_IN_TOOLS)}); got {tool.to_json()}"
            )
        field = fields[0]
        if name is None:
            server = tool.anthropic_server_tool
            name = server.name if server is not None else _DEFAULT_NAMES[field]
        super().__init__(name=name, description=f"the built-in tool {field} ({BUILT_IN_TOOLS[field]})")
        self._tool = tool
        self._field = field

    @property
    def tool(self) -> Tool:
        """The request's tool entry."""
        return self._tool

    @property
    def built_in(self) -> str:
        """Which built-in tool it is: its :class:`~rxllm.Tool` field (``"google_search"``...)."""
        return self._field

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[ToolResult]:
        """Answers an error: the provider runs a built-in tool, the model never calls it as a function."""
        return fail_now(
            ToolError(f"{self.name!r} is a built-in tool that {BUILT_IN_TOOLS[self._field]} runs; it is not a function")
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._tool!r})"


class GoogleSearchTool(BuiltInTool):
    """Gemini's Google Search grounding (ADK's ``GoogleSearchTool``, named ``google_search``).

    Args:
        google_search: its settings; None: the defaults (``GoogleSearch()``).
    """

    def __init__(self, google_search: GoogleSearch | None = None) -> None:
        super().__init__(Tool(google_search=google_search or GoogleSearch()))


class BuiltInCodeExecutionTool(BuiltInTool):
    """Gemini's code execution (ADK's ``BuiltInCodeExecutionTool``, named ``code_execution``)."""

    def __init__(self) -> None:
        super().__init__(Tool(code_execution=ToolCodeExecution()))


class UrlContextTool(BuiltInTool):
    """Gemini's URL context (ADK's ``UrlContextTool``, named ``url_context``)."""

    def __init__(self) -> None:
        super().__init__(Tool(url_context=UrlContext()))


def tool_declarations(tools: Iterable[BaseTool]) -> tuple[Tool, ...]:
    """What a request declares for ``tools``: one :class:`~rxllm.Tool` with every function
    declaration (none without declarations) and each built-in tool's entry, in ADK Java's order
    (see the module docstring)."""
    built_in: list[Tool] = []
    declarations = []
    position = 0
    for tool in tools:
        if isinstance(tool, BuiltInTool):
            built_in.append(tool.tool)
            continue
        declaration = tool.declaration()
        if declaration is not None:
            declarations.append(declaration)
            position = len(built_in)
    if not declarations:
        return tuple(built_in)
    return (*built_in[:position], Tool(function_declarations=tuple(declarations)), *built_in[position:])
