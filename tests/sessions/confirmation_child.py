"""A child process for the tool-confirmation restart test: runs the first half of a confirmation flow.

Usage: python confirmation_child.py (sqlite|postgres) TARGET

Creates the session ``files/u1/s1``, runs an agent whose model calls ``delete_file`` (a tool
that requires confirmation), prints the id of the ``adk_request_confirmation`` call and exits:
the store alone carries the paused call to the process that answers it.
"""

from __future__ import annotations

import sys

from reactivex import operators as ops

from rxllm import Chunk, ToolCallFragment
from rxllm.agents import (
    BaseSessionService,
    FunctionTool,
    LlmAgent,
    PostgresSessionService,
    Runner,
    SqliteSessionService,
)
from rxllm.testing import ScriptedLlm, scripted_turn


def delete_file(path: str) -> dict[str, str]:
    """Delete a file."""
    raise AssertionError("the first process must never run the tool")


def main() -> None:
    kind, target = sys.argv[1], sys.argv[2]
    service: BaseSessionService = (
        SqliteSessionService(target) if kind == "sqlite" else PostgresSessionService(target, max_size=1)
    )
    call = ToolCallFragment(0, "call_1", "delete_file", '{"path": "/tmp/report.txt"}')
    model = ScriptedLlm(
        [scripted_turn(Chunk(tool_call_fragments=(call,))), scripted_turn(Chunk(text_delta="Shall I delete it?"))]
    )
    agent = LlmAgent("files", model, tools=[FunctionTool(delete_file, require_confirmation=True)])
    service.create_session("files", "u1", session_id="s1").run()
    events = Runner(agent, "files", service).run_async("u1", "s1", "Delete /tmp/report.txt").pipe(ops.to_list()).run()
    (request,) = [e for e in events if e.long_running_tool_ids]
    print(request.long_running_tool_ids[0], flush=True)  # type: ignore[index]
    service.close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
