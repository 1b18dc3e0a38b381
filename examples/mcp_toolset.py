"""An agent using an MCP server's tools, as ADK Java's ``mcpfilesystem`` sample does, without node.

The server is rxllm itself: this script, started with ``--serve``, serves two function tools over
MCP's stdio transport (``rxllm.mcp.serve``). The main run starts it as a subprocess through an
``McpToolset``, gives the toolset to an ``LlmAgent`` with a scripted model (no key needed), and
prints the tool calls and answers; closing the runner stops the server. ADK Java's sample
points ``StdioServerParameters`` at ``npx @modelcontextprotocol/server-filesystem``; any MCP
server works the same way.

Run it::

    python examples/mcp_toolset.py
"""

from __future__ import annotations

import json
import sys

from reactivex import operators as ops

from rxllm import Chunk, Content, Part, ToolCallFragment
from rxllm.agents import InMemoryRunner, LlmAgent, McpToolset, StdioServerParameters
from rxllm.testing import ScriptedLlm, scripted_turn

NOTES = {"groceries": "milk, eggs", "todo": "call the plumber"}


def list_notes() -> list[str]:
    """The names of the notes."""
    return sorted(NOTES)


def read_note(name: str) -> str:
    """One note's text.

    Args:
        name: the note's name, from list_notes.
    """
    if name not in NOTES:
        raise KeyError(f"no note named {name!r}")
    return NOTES[name]


def serve() -> None:
    from rxllm.mcp import serve as serve_tools

    serve_tools([list_notes, read_note], name="notes")


def call(index: int, name: str, args: dict[str, str]) -> Chunk:
    return Chunk(tool_call_fragments=(ToolCallFragment(0, f"call_{index}", name, json.dumps(args)),))


def main() -> None:
    toolset = McpToolset(StdioServerParameters(sys.executable, [__file__, "--serve"]))
    model = ScriptedLlm([
        scripted_turn(call(1, "list_notes", {})),
        scripted_turn(call(2, "read_note", {"name": "groceries"})),
        scripted_turn(call(3, "read_note", {"name": "recipes"})),
        scripted_turn(Chunk(text_delta="Your groceries: milk, eggs.")),
    ])
    # the runner opens one MCP session (one server process) on first use; close() stops it
    with InMemoryRunner(LlmAgent("notes_agent", model, tools=[toolset]), app_name="notes") as runner:
        runner.session_service.create_session("notes", "u1", session_id="s1").run()
        question = Content(role="user", parts=(Part.from_text("What do I need to buy?"),))
        runner.run_async("u1", "s1", question).pipe(ops.to_list()).run()
        pid = toolset.server_pid
    toolset.close()
    declared = [d.name for d in model.requests[0][0].config.function_declarations()]
    print("tools:", sorted(declared))
    events = runner.session_service.get_session("notes", "u1", "s1").run().events
    for event in events:
        for function_call in event.function_calls():
            print(f"  call  {function_call.name}({json.dumps(function_call.args)})")
        for response in event.function_responses():
            print(f"  reply {json.dumps(response.response)[:100]}")
        if event.text():
            print(f"  {event.author}: {event.text()}")
    replies = [r.response for e in events for r in e.function_responses()]
    assert "milk, eggs" in json.dumps(replies[1]) and "error" in replies[2], replies
    assert pid is not None and toolset.server_pid is None  # the server ran, and was stopped with the runner
    print("mcp toolset: OK")


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
    else:
        main()
