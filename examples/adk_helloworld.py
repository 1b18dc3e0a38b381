"""ADK Java's ``contrib/samples/helloworld`` ported: an agent that rolls dice and checks primes.

``HelloWorldAgent.java`` + ``HelloWorldRun.java`` in Python. The model is scripted (no key
needed): it calls ``roll_die(sides=60)``, then ``check_prime`` with the roll, then answers. Like
the Java sample, ``roll_die`` appends to the list in ``state["rolls"]`` *in place*; rxllm persists
that change like an assignment. The run prints what ``HelloWorldRun`` prints (each event's
``stringify_content()``), then checks the stored state.

Run it::

    python examples/adk_helloworld.py
"""

from __future__ import annotations

import json
import random
import sys

from reactivex import operators as ops

from rxllm import Chunk, Content, LlmResponse, Part, ToolCallFragment
from rxllm.agents import Event, InMemorySessionService, LlmAgent, RunConfig, Runner, ToolContext
from rxllm.testing import ScriptedLlm, scripted_turn

DICE = random.Random(7)


def roll_die(sides: int, tool_context: ToolContext) -> dict[str, int]:
    """Roll a die and return the rolled result.

    Args:
        sides: The integer number of sides the die has.
    """
    if "rolls" not in tool_context.state:
        tool_context.state["rolls"] = []
    result = DICE.randint(1, sides)
    rolls = tool_context.state["rolls"]
    assert isinstance(rolls, list)
    rolls.append(result)  # in place, as the Java sample does: persisted like an assignment
    return {"result": result}


def check_prime(nums: list[int]) -> dict[str, str]:
    """Check if a given list of numbers are prime.

    Args:
        nums: The list of numbers to check.
    """
    primes = [str(n) for n in nums if n > 1 and all(n % i for i in range(2, int(n**0.5) + 1))]
    return {"result": ", ".join(primes) + " are prime numbers." if primes else "No prime numbers found."}


def call(call_id: str, name: str, args: dict[str, object]) -> list[LlmResponse]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, json.dumps(args)),)))


def scripted_model(first_roll: int) -> ScriptedLlm:
    """What gemini-2.0-flash might answer, scripted: roll, check the roll, answer."""
    return ScriptedLlm(
        [
            call("call_1", "roll_die", {"sides": 60}),
            call("call_2", "check_prime", {"nums": [first_roll]}),
            scripted_turn(Chunk(text_delta=f"I rolled a 60-sided die and got {first_roll}.")),
        ]
    )


def root_agent(model: ScriptedLlm) -> LlmAgent:
    return LlmAgent(
        "data_processing_agent",
        model,
        description="hello world agent that can roll a dice and check prime numbers.",
        instruction="You roll dice and answer questions about the outcome of the dice rolls.",
        tools=[roll_die, check_prime],
    )


def main() -> int:
    first_roll = random.Random(7).randint(1, 60)  # what DICE will roll first
    app_name, user_id, session_id = "hello-world-app", "hello-world-user", "s1"
    session_service = InMemorySessionService()
    runner = Runner(root_agent(scripted_model(first_roll)), app_name, session_service)
    session_service.create_session(app_name, user_id, {}, session_id).run()

    prompt = "Hi. Roll a die of 60 sides."
    print(f"You> {prompt}")
    message = Content(role="user", parts=(Part.from_text(prompt),))
    events: list[Event] = runner.run_async(user_id, session_id, message, RunConfig()).pipe(ops.to_list()).run()
    print("Agent> " + "".join(event.stringify_content().rstrip() for event in events))

    state = session_service.get_session(app_name, user_id, session_id).run().state
    print(f"state: rolls = {state.get('rolls')}")
    ok = state.get("rolls") == [first_roll] and events[-1].text().endswith(f"got {first_roll}.")
    print("helloworld: OK" if ok else "helloworld: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
