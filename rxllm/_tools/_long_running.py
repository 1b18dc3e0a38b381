"""``LongRunningFunctionTool``: a tool whose real answer comes later (ADK's ``tools/LongRunningFunctionTool.java``).

The model's call is recorded in the model event's ``long_running_tool_ids``. The function runs as
usual and typically starts the work (asks a human, queues a job):

- if it returns None, no function response is stored and the run pauses: the model event is the
  turn's final response (``is_final_response()``);
- if it returns a value (``{"status": "pending"}``), that is stored as an intermediate response
  and the model is asked again (it can tell the user to wait), as in ADK.

A later user message carrying a :class:`~rxllm.FunctionResponse` with the call's id resumes the
run: the runner gives that turn to the agent that made the call, and the history puts the answer
next to the call (``_contents``).

>>> def ask_for_approval(amount: int) -> None:
...     '''Ask a manager to approve a refund.'''
>>> tool = LongRunningFunctionTool(ask_for_approval)
>>> tool.is_long_running, tool.description.startswith("Ask a manager")
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactivex import abc as rx_abc

from ._tool import FunctionTool

__all__ = ["LongRunningFunctionTool"]

_NOTE = (
    "NOTE: This is a long-running operation. Do not call this tool again if it has already returned some "
    "intermediate or pending status."
)


class LongRunningFunctionTool(FunctionTool):
    """A :class:`FunctionTool` whose call is long-running (see the module docstring).

    Args:
        func: the function; it starts the work and returns None (pause) or an interim status.
        name: the tool's name; the function's ``__name__`` by default.
        description: the description; the docstring's summary, plus ADK's note that the model must
            not call the tool again while it is pending.
        scheduler: where the function runs (see :class:`FunctionTool`).
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        scheduler: rx_abc.SchedulerBase | None = None,
    ) -> None:
        super().__init__(func, name=name, description=description, scheduler=scheduler)
        if description is None:
            self._description = f"{self._description}\n\n{_NOTE}".strip()

    @property
    def is_long_running(self) -> bool:
        """Always True: the flow records the call in ``long_running_tool_ids``."""
        return True
