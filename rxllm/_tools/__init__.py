"""The tool layer both runtimes stand on (private): tools, their contexts, tool calls, request building.

``rxllm.agents`` and ``rxllm.service`` both import this package and never each other. Public
names are re-exported where users import them (``rxllm.agents.FunctionTool``, ``ToolContext``,
``State``...).

- :mod:`._tool`: ``BaseTool``, ``FunctionTool`` (a declaration from a plain function), ``as_tool``,
  ``tools_by_name``, ``tool_declarations``.
- :mod:`._calls`: ``call_tool``, the one place a tool call is executed, and its ``ToolCallOutcome``.
- :mod:`._context`: ``ReadonlyContext``, ``CallbackContext``, ``ToolContext``, ``ToolActions``.
- :mod:`._state`: ``State``, the session state seen by callbacks and tools.
- :mod:`._request`: ``request_config``.
- :mod:`._rx`: small synchronous Rx building blocks.
"""

from ._calls import ToolCallOutcome, call_tool
from ._context import (
    CallbackContext,
    InvocationView,
    ReadonlyContext,
    SessionView,
    ToolActions,
    ToolContext,
    new_invocation_id,
)
from ._named import Named
from ._request import request_config
from ._state import APP_PREFIX, STATE_REMOVED, TEMP_PREFIX, USER_PREFIX, State
from ._tool import (
    BaseTool,
    FunctionTool,
    ToolLike,
    ToolResult,
    as_tool,
    describe_validation_error,
    tool_declarations,
    tools_by_name,
)

__all__ = [
    "APP_PREFIX",
    "STATE_REMOVED",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "BaseTool",
    "CallbackContext",
    "FunctionTool",
    "InvocationView",
    "Named",
    "ReadonlyContext",
    "SessionView",
    "State",
    "ToolActions",
    "ToolCallOutcome",
    "ToolContext",
    "ToolLike",
    "ToolResult",
    "as_tool",
    "call_tool",
    "describe_validation_error",
    "new_invocation_id",
    "request_config",
    "tool_declarations",
    "tools_by_name",
]
