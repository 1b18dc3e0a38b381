"""A writer → reviewer ``SequentialAgent`` (ADK's workflow-agent pattern), with scripted models.

The writer drafts and saves its draft in state (``output_key``); the reviewer runs next in the
same invocation. The reviewer's model is given the writer's reply as *user-role context*
(``For context: [writer] said: ...``), as ADK's ``Contents.java`` rewrites another agent's turn,
and its instruction reads the draft from state (``{draft}``).

Run it::

    python examples/adk_writer_reviewer.py
"""

from __future__ import annotations

import sys

from reactivex import operators as ops

from rxllm import Chunk, Content, Part
from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, SequentialAgent, StreamingMode
from rxllm.testing import ScriptedLlm, scripted_turn

DRAFT = "Old pond / a frog jumps in / the sound of water."


def main() -> int:
    writer_model = ScriptedLlm(
        [scripted_turn(Chunk(text_delta="Old pond / a frog jumps in / "), Chunk(text_delta="the sound of water."))]
    )
    reviewer_model = ScriptedLlm([scripted_turn(Chunk(text_delta="Classic. Keep it."))])
    writer = LlmAgent("writer", writer_model, instruction="Write a haiku about the topic.", output_key="draft")
    reviewer = LlmAgent("reviewer", reviewer_model, instruction="Review this haiku: {draft}")
    runner = InMemoryRunner(SequentialAgent("pipeline", sub_agents=[writer, reviewer]), app_name="poems")
    runner.session_service.create_session("poems", "u1", session_id="s1").run()

    message = Content(role="user", parts=(Part.from_text("A haiku about a pond, please."),))
    run_config = RunConfig(streaming_mode=StreamingMode.SSE)
    events: list[Event] = runner.run_async("u1", "s1", message, run_config).pipe(ops.to_list()).run()
    for event in events:
        if not event.partial:
            print(f"{event.author}: {event.text()}")

    request = reviewer_model.requests[0][0]
    print("reviewer's request:")
    for content in request.contents:
        print(f"  {content.role}: {' | '.join(p.text or '' for p in content.parts)}")
    instruction = request.config.system_instruction
    ok = (
        request.contents[-1].role == "user"
        and [p.text for p in request.contents[-1].parts] == ["For context:", f"[writer] said: {DRAFT}"]
        and instruction is not None
        and instruction.text() == f'Review this haiku: {DRAFT}\n\nYou are an agent. Your internal name is "reviewer".'
    )
    print("writer/reviewer: OK" if ok else "writer/reviewer: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
