"""``exit_loop``: the tool an agent inside a ``LoopAgent`` calls to end the loop (ADK Java's ``ExitLoopTool``).

Its name and description are ADK's (Java's ``ExitLoopTool.INSTANCE``, Python's ``exit_loop``). A
call sets ``escalate`` (the ``LoopAgent`` stops at the function-response event) and
``skip_summarization`` (the calling agent's turn ends with that event, no further model call).

>>> exit_loop.name, exit_loop.declaration().parameters["properties"]
('exit_loop', {})
"""

from __future__ import annotations

from ._context import ToolContext
from ._tool import FunctionTool

__all__ = ["exit_loop"]


def _exit_loop(tool_context: ToolContext) -> None:
    tool_context.actions.escalate = True
    tool_context.actions.skip_summarization = True


exit_loop: FunctionTool = FunctionTool(
    _exit_loop,
    name="exit_loop",
    description="Exits the loop.\n\nCall this function only when you are instructed to do so.",
)
"""The ``exit_loop`` tool: give it to an agent of a ``LoopAgent`` (``LlmAgent(..., tools=[exit_loop])``)."""
