"""``load_memory``: the tool that lets the model search the user's memory (ADK's ``LoadMemoryTool``)."""

from __future__ import annotations

from typing import Any

from ..._core.types import LlmRequest
from ..._tools import FunctionTool, ToolContext

__all__ = ["MEMORY_INSTRUCTION", "LoadMemoryTool", "load_memory"]

MEMORY_INSTRUCTION = (
    "You have memory. You can use it to answer questions. If any questions need\n"
    "you to look up the memory, you should call load_memory function with a query.\n"
)
"""What an agent with ``load_memory`` is told (ADK Java's ``LoadMemoryTool.processLlmRequest``, with
the tool's name as rxllm and ADK Python spell it)."""

_DESCRIPTION = (
    "Searches the memory of earlier conversations with this user for the query's words and returns what was "
    "said. Call it when a question needs something the user said in an earlier conversation."
)


def _load_memory(query: str, tool_context: ToolContext) -> dict[str, Any]:
    """Search the user's memory.

    Args:
        query: the words to look for in earlier conversations.
    """
    response = tool_context.search_memory(query).run()
    return {
        "memories": [entry.model_dump(mode="json", by_alias=True, exclude_none=True) for entry in response.memories]
    }


class LoadMemoryTool(FunctionTool):
    """A tool named ``load_memory`` with one parameter, ``query``: it searches the run's memory service.

    The run needs a memory service (``Runner(..., memory_service=...)``); without one the call's
    response is an error the model sees. The response is ``{"memories": [MemoryEntry as JSON, ...]}``.
    Before every model call it adds ADK's memory instruction (``MEMORY_INSTRUCTION``: "You have
    memory. ...") to the system instruction, as ADK Java's ``processLlmRequest`` does.

    >>> from rxllm.agents import load_memory
    >>> load_memory.name, load_memory.declaration().parameters["required"]
    ('load_memory', ['query'])
    """

    def __init__(self) -> None:
        super().__init__(_load_memory, name="load_memory", description=_DESCRIPTION)

    def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> LlmRequest:
        """The request with :data:`MEMORY_INSTRUCTION` appended to its system instruction."""
        return llm_request.append_instructions(MEMORY_INSTRUCTION)


load_memory: LoadMemoryTool = LoadMemoryTool()
"""The ``load_memory`` tool: give it to an agent (``LlmAgent(..., tools=[load_memory])``)."""
