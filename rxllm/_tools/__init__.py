"""The tool layer both runtimes stand on (private): tools, their contexts, tool calls, request building.

``rxllm.agents`` and ``rxllm.service`` both import this package and never each other. Public
names are re-exported where users import them (``rxllm.agents.FunctionTool``, ``ToolContext``,
``State``...).

- :mod:`._tool`: ``BaseTool``, ``FunctionTool`` (a declaration from a plain function), ``as_tool``,
  ``tools_by_name``.
- :mod:`._execution`: ``execute_tool``, the one function that runs a tool (worker pool, loop,
  timeout), and ``ToolRuntime``; :mod:`._loops` the pool and loop machinery.
- :mod:`._calls`: ``call_tool``, one function call of the model to its ``ToolCallOutcome``.
- :mod:`._json_safe`: what JSON cannot carry never reaches a request.
- :mod:`._context`: ``ReadonlyContext``, ``CallbackContext``, ``ToolContext``, ``ToolActions``.
- :mod:`._confirmation`: ``ToolConfirmation`` and the ``adk_request_confirmation`` protocol.
- :mod:`._state`: ``State``, the session state seen by callbacks and tools.
- :mod:`._services`: ``ArtifactStore``, ``MemorySearch`` (what a context calls on the agent
  runtime's services, as protocols) and the memory search's answer.
- :mod:`._long_running`: ``LongRunningFunctionTool``; :mod:`._named`: ``Named``.
- :mod:`._request`: ``request_config``.
- :mod:`._toolset`: ``BaseToolset`` and the expansion of an agent's toolsets; :mod:`._scope`
  ``ResourceScope``, where toolsets keep what they open for a runner or an invocation.
- :mod:`._built_in`: ``BuiltInTool`` (a provider's own tool as a tool entry: ``GoogleSearchTool``...)
  and ``tool_declarations``, the tools of a request.

Imports ``_core``, ``_rx`` and ``_telemetry``; never a runtime (``rxllm.agents`` types reach it
only as protocols), a model or a provider.
"""

from ._built_in import BuiltInCodeExecutionTool, BuiltInTool, GoogleSearchTool, UrlContextTool, tool_declarations
from ._calls import ExecuteTool, ToolCallOutcome, call_tool, call_tool_then
from ._confirmation import REQUEST_CONFIRMATION_FUNCTION_CALL_NAME, ToolConfirmation, confirmation_from_response
from ._context import (
    CallbackContext,
    InvocationView,
    ReadonlyContext,
    SessionView,
    ToolActions,
    ToolContext,
    new_invocation_id,
)
from ._execution import ToolRuntime, execute_tool
from ._json_safe import json_problem, jsonable, safe_content, safe_response
from ._loops import (
    DEFAULT_TOOL_WORKERS,
    check_timeout,
    coroutine_observable,
    current_tool_loop,
    default_tool_scheduler,
    running_loop,
    tool_loop,
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
    tools_by_name,
)

__all__ = [
    "APP_PREFIX",
    "DEFAULT_TOOL_WORKERS",
    "REQUEST_CONFIRMATION_FUNCTION_CALL_NAME",
    "STATE_REMOVED",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "BaseTool",
    "BuiltInCodeExecutionTool",
    "BuiltInTool",
    "CallbackContext",
    "ExecuteTool",
    "FunctionTool",
    "GoogleSearchTool",
    "InvocationView",
    "Named",
    "ReadonlyContext",
    "SessionView",
    "State",
    "ToolActions",
    "ToolCallOutcome",
    "ToolConfirmation",
    "ToolContext",
    "ToolLike",
    "ToolResult",
    "ToolRuntime",
    "UrlContextTool",
    "as_tool",
    "call_tool",
    "call_tool_then",
    "check_timeout",
    "confirmation_from_response",
    "coroutine_observable",
    "current_tool_loop",
    "default_tool_scheduler",
    "describe_validation_error",
    "execute_tool",
    "json_problem",
    "jsonable",
    "new_invocation_id",
    "request_config",
    "running_loop",
    "safe_content",
    "safe_response",
    "tool_declarations",
    "tool_loop",
    "tools_by_name",
]
