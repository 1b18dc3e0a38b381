"""A ``LoopAgent`` refine-until-good loop: a writer revises, a critic approves by escalating.

``LoopAgent(refine, [writer, critic], max_iterations=5)``. The critic either criticises (the loop
goes round again) or calls ``exit_loop``, ADK's ``ExitLoopTool`` (``rxllm.agents.exit_loop``): it
sets ``escalate`` and ``skip_summarization``, so the critic's turn ends and the loop stops at that
event, as ADK's ``LoopAgent`` does. Scripted models: the critic approves the second draft.

Run it::

    python examples/adk_loop_refine.py
"""

from __future__ import annotations

import sys

from reactivex import operators as ops

from rxllm import Chunk, Content, Part, ToolCallFragment
from rxllm.agents import Event, InMemoryRunner, LlmAgent, LoopAgent, exit_loop
from rxllm.testing import ScriptedLlm, scripted_turn


def main() -> int:
    writer_model = ScriptedLlm(
        [
            scripted_turn(Chunk(text_delta="Ponds are wet.")),
            scripted_turn(Chunk(text_delta="Ponds hold still water, frogs and reeds.")),
        ]
    )
    critic_model = ScriptedLlm(
        [
            scripted_turn(Chunk(text_delta="Too short: say what lives there.")),
            scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", "exit_loop", "{}"),))),
        ]
    )
    loop = LoopAgent(
        "refine",
        sub_agents=[
            LlmAgent(
                "writer", writer_model, instruction="Write or improve one sentence about ponds.", output_key="draft"
            ),
            LlmAgent("critic", critic_model, instruction="Criticise {draft}, or call exit_loop.", tools=[exit_loop]),
        ],
        max_iterations=5,
    )
    runner = InMemoryRunner(loop, app_name="refine")
    runner.session_service.create_session("refine", "u1", session_id="s1").run()
    message = Content(role="user", parts=(Part.from_text("One sentence about ponds."),))
    events: list[Event] = runner.run_async("u1", "s1", message).pipe(ops.to_list()).run()
    for event in events:
        what = event.text() or event.stringify_content()
        print(f"{event.author}: {what}{'  [escalate]' if event.actions.escalate else ''}")

    state = runner.session_service.get_session("refine", "u1", "s1").run().state
    ok = (
        bool(events[-1].actions.escalate)
        and len(critic_model.requests) == 2  # exit_loop's response ends the critic's turn: no third call
        and state.get("draft") == "Ponds hold still water, frogs and reeds."
        and len(writer_model.requests) == 2
    )
    print(f"rounds: {len(writer_model.requests)}")
    print("loop refine: OK" if ok else "loop refine: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
