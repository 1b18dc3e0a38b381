"""Agent transfer: a router hands the conversation to one of two specialists (ADK's ``sub_agents``).

The router has ``billing`` and ``shipping`` as sub-agents, so its model is offered the
``transfer_to_agent`` tool and told who they are (their ``description``). It transfers to
``billing``; the run continues with ``billing`` in the same invocation; and the user's next
message goes straight to ``billing``, the agent that answered last, as ADK's runner does.

Run it::

    python examples/adk_transfer_router.py
"""

from __future__ import annotations

import sys

from reactivex import operators as ops

from rxllm import Chunk, Content, Part, ToolCallFragment
from rxllm.agents import Event, InMemoryRunner, LlmAgent
from rxllm.testing import ScriptedLlm, scripted_turn


def ask(runner: InMemoryRunner, text: str) -> list[Event]:
    print(f"user: {text}")
    message = Content(role="user", parts=(Part.from_text(text),))
    events: list[Event] = runner.run_async("u1", "s1", message).pipe(ops.to_list()).run()
    for event in events:
        if event.actions.transfer_to_agent:
            print(f"  {event.author} -> transfer to {event.actions.transfer_to_agent}")
        elif event.text():
            print(f"  {event.author}: {event.text()}")
    return events


def main() -> int:
    transfer = ToolCallFragment(0, "call_1", "transfer_to_agent", '{"agent_name": "billing"}')
    router_model = ScriptedLlm([scripted_turn(Chunk(tool_call_fragments=(transfer,)))])
    billing_model = ScriptedLlm(
        [
            scripted_turn(Chunk(text_delta="Your refund of 40 EUR was sent on Monday.")),
            scripted_turn(Chunk(text_delta="It takes 3 to 5 business days.")),
        ]
    )
    shipping_model = ScriptedLlm([])
    router = LlmAgent(
        "router",
        router_model,
        instruction="Send each question to the right specialist.",
        sub_agents=[
            LlmAgent("billing", billing_model, description="Invoices, payments and refunds."),
            LlmAgent("shipping", shipping_model, description="Where parcels are and when they arrive."),
        ],
    )
    runner = InMemoryRunner(router, app_name="help-desk")
    runner.session_service.create_session("help-desk", "u1", session_id="s1").run()

    first = ask(runner, "Where is my refund?")
    second = ask(runner, "How long does it take?")

    offered = [d.name for t in router_model.requests[0][0].config.tools or () for d in t.function_declarations]
    ok = (
        "transfer_to_agent" in offered
        and [e.author for e in first if e.text()] == ["billing"]
        and [e.author for e in second] == ["billing"]
        and len(router_model.requests) == 1
        and shipping_model.requests == []
    )
    print(f"router was offered: {offered}")
    print("transfer: OK" if ok else "transfer: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
