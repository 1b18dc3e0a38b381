"""rxllm.agents: ADK Java's agent runtime in Python, returning Observables.

Events, run configs, tools, sessions that never store partials, the LLM flow and the runner. The
names are ADK's, in snake_case. Everything that returns an Observable is cold.

>>> from reactivex import operators as ops
>>> from rxllm import Chunk, Content, Part, ToolCallFragment
>>> from rxllm.agents import InMemoryRunner, LlmAgent, RunConfig, StreamingMode
>>> from rxllm.testing import ScriptedLlm, scripted_turn
>>> def get_order(order_id: str) -> dict[str, str]:
...     '''Look an order up by its id.'''
...     return {"order_id": order_id, "status": "shipped Tuesday"}
>>> model = ScriptedLlm([
...     scripted_turn(Chunk(text_delta="Let me check."),
...                   Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", "get_order", '{"order_id":'),)),
...                   Chunk(tool_call_fragments=(ToolCallFragment(0, arguments_delta='"A17"}'),))),
...     scripted_turn(Chunk(text_delta="It shipped "), Chunk(text_delta="Tuesday.")),
... ])
>>> runner = InMemoryRunner(LlmAgent("support", model, tools=[get_order]), app_name="shop")
>>> _ = runner.session_service.create_session("shop", "u1", session_id="s1").run()
>>> question = Content(role="user", parts=(Part.from_text("Where is order A17?"),))
>>> events = runner.run_async("u1", "s1", question, RunConfig(streaming_mode=StreamingMode.SSE)).pipe(
...     ops.to_list()).run()
>>> [(e.partial, e.text()) for e in events if e.partial]
[(True, 'Let me check.'), (True, 'It shipped '), (True, 'Tuesday.')]
>>> history = runner.session_service.get_session("shop", "u1", "s1").run().events
>>> for e in history:
...     print(e.author, repr(e.text()), [c.args for c in e.function_calls()],
...           [r.response for r in e.function_responses()])
user 'Where is order A17?' [] []
support 'Let me check.' [{'order_id': 'A17'}] []
support '' [] [{'order_id': 'A17', 'status': 'shipped Tuesday'}]
support 'It shipped Tuesday.' [] []
"""

# Layering (docs/architecture.md): this package imports _core, _rx, _telemetry, _models, the tool layer (_tools) and,
# by name only, providers (LlmRegistry); never rxllm.service. Its sub-rooms, bottom up:
# _sessions → _artifacts, _memory → _invocation → _flows → _agents →
# _runners.

from .._core.public import publish as _publish
from .._tools import (
    BaseTool,
    BuiltInCodeExecutionTool,
    BuiltInTool,
    CallbackContext,
    FunctionTool,
    GoogleSearchTool,
    ReadonlyContext,
    ToolActions,
    ToolConfirmation,
    ToolContext,
    ToolLike,
    UrlContextTool,
)
from .._tools._examples import BaseExampleProvider, Example, ExampleTool, build_example_si
from .._tools._exit_loop import exit_loop
from .._tools._long_running import LongRunningFunctionTool
from .._tools._mcp import McpToolset, SseServerParameters, StdioServerParameters, StreamableHttpServerParameters
from .._tools._services import MemoryEntry, SearchMemoryResponse
from .._tools._toolset import BaseToolset
from ._agents.llm_agent import LlmAgent
from ._agents.registry import LlmFactory, LlmRegistry
from ._agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
from ._artifacts.service import BaseArtifactService, FileArtifactService, InMemoryArtifactService
from ._flows.contents import IncludeContents
from ._flows.flow_agent import (
    AfterModelCallback,
    AfterToolCallback,
    BeforeModelCallback,
    BeforeToolCallback,
    OnModelErrorCallback,
    OnToolErrorCallback,
)
from ._flows.instructions import InstructionProvider
from ._invocation.base import AgentCallback, BaseAgent, BasePlugin, InvocationContext
from ._invocation.live_request_queue import LiveRequest, LiveRequestQueue
from ._invocation.run_config import RunConfig, StreamingMode
from ._memory.service import BaseMemoryService, InMemoryMemoryService
from ._memory.tools import LoadMemoryTool, load_memory
from ._runners.agent_tool import AgentTool
from ._runners.compaction import (
    BaseEventSummarizer,
    EventsCompactionConfig,
    LlmEventSummarizer,
    SlidingWindowEventCompactor,
    TailRetentionEventCompactor,
)
from ._runners.runner import InMemoryRunner, Runner
from ._sessions.base import BaseSessionService, GetSessionConfig, InMemorySessionService, Session
from ._sessions.event import Event, EventActions, EventCompaction
from ._sessions.postgres import PostgresSessionService
from ._sessions.sqlite import SqliteSessionService
from ._sessions.state import STATE_REMOVED, State

__all__ = [
    "AfterModelCallback",
    "AfterToolCallback",
    "AgentCallback",
    "AgentTool",
    "BaseAgent",
    "BaseArtifactService",
    "BaseEventSummarizer",
    "BaseExampleProvider",
    "BaseMemoryService",
    "BasePlugin",
    "BaseSessionService",
    "BaseTool",
    "BaseToolset",
    "BeforeModelCallback",
    "BeforeToolCallback",
    "BuiltInCodeExecutionTool",
    "BuiltInTool",
    "CallbackContext",
    "Event",
    "EventActions",
    "EventCompaction",
    "EventsCompactionConfig",
    "Example",
    "ExampleTool",
    "FileArtifactService",
    "FunctionTool",
    "GetSessionConfig",
    "GoogleSearchTool",
    "InMemoryArtifactService",
    "InMemoryMemoryService",
    "InMemoryRunner",
    "InMemorySessionService",
    "IncludeContents",
    "InstructionProvider",
    "InvocationContext",
    "LiveRequest",
    "LiveRequestQueue",
    "LlmAgent",
    "LlmEventSummarizer",
    "LlmFactory",
    "LlmRegistry",
    "LoadMemoryTool",
    "LongRunningFunctionTool",
    "LoopAgent",
    "McpToolset",
    "MemoryEntry",
    "OnModelErrorCallback",
    "OnToolErrorCallback",
    "ParallelAgent",
    "PostgresSessionService",
    "ReadonlyContext",
    "RunConfig",
    "Runner",
    "STATE_REMOVED",
    "SearchMemoryResponse",
    "SequentialAgent",
    "Session",
    "SlidingWindowEventCompactor",
    "SqliteSessionService",
    "SseServerParameters",
    "State",
    "StdioServerParameters",
    "StreamableHttpServerParameters",
    "StreamingMode",
    "TailRetentionEventCompactor",
    "ToolActions",
    "ToolConfirmation",
    "ToolContext",
    "ToolLike",
    "UrlContextTool",
    "build_example_si",
    "exit_loop",
    "load_memory",
]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
