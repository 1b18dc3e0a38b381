"""ADK Java's ``contrib/samples/configagent`` ``multi_agent_llm_config`` ported: a coordinator with
few-shot examples (``ExampleTool``) that delegates to a dice agent and a prime agent.

``root_agent.yaml``, ``roll_agent.yaml``, ``prime_agent.yaml`` and ``CustomDieTool.java`` in Python:
the coordinator's tools hold ``CustomDieTool.EXAMPLE_TOOL_INSTANCE`` (three examples); it transfers
the question to ``roll_agent``, which calls ``roll_die`` and transfers to its peer ``prime_agent``,
which calls ``check_prime`` and answers. The models are scripted (no key needed). The example tool
is never offered to a model: it appends ADK's few-shot block to the coordinator's system
instruction, and only to that agent's (the sample's example outputs have no role, so ADK shows them
as ``[user]``; so does rxllm). The YAML's ``safety_settings`` are left out: they only reach Gemini.

Run it::

    python examples/adk_dice_prime_examples.py
"""

from __future__ import annotations

import json
import random
import sys

from reactivex import operators as ops

from rxllm import Chunk, Content, LlmResponse, Part, ToolCallFragment
from rxllm.agents import Event, Example, ExampleTool, InMemoryRunner, LlmAgent, ToolContext
from rxllm.testing import ScriptedLlm, scripted_turn

DICE = random.Random(3)


def text(value: str) -> Content:
    return Content(parts=(Part.from_text(value),))  # Content.fromParts: no role, as in the Java sample


EXAMPLE_TOOL = ExampleTool(
    [
        Example(input=text("Roll a 6-sided die."), output=(text("I rolled a 4 for you."),)),
        Example(input=text("Is 7 a prime number?"), output=(text("Yes, 7 is a prime number."),)),
        Example(
            input=text("Roll a 10-sided die and check if it's prime."),
            output=(text("I rolled an 8 for you."), text("8 is not a prime number.")),
        ),
    ]
)


def roll_die(sides: int, tool_context: ToolContext) -> dict[str, int]:
    """Roll a die with specified number of sides

    Args:
        sides: Number of sides on the die
    """
    if "rolls" not in tool_context.state:
        tool_context.state["rolls"] = []
    result = DICE.randint(1, sides)
    rolls = tool_context.state["rolls"]
    assert isinstance(rolls, list)
    rolls.append(result)
    return {"result": result}


def check_prime(nums: list[int]) -> dict[str, str]:
    """Check if numbers are prime

    Args:
        nums: List of numbers to check for primality
    """
    primes = {str(n) for n in nums if n > 1 and all(n % i for i in range(2, int(n**0.5) + 1))}
    return {"result": ", ".join(sorted(primes)) + " are prime numbers." if primes else "No prime numbers found."}


def call(call_id: str, name: str, args: dict[str, object]) -> list[LlmResponse]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, json.dumps(args)),)))


def agents(roll: int) -> tuple[LlmAgent, ScriptedLlm, ScriptedLlm, ScriptedLlm]:
    """The three agents of the YAML files, with what gemini-2.5-flash might answer, scripted."""
    root_model = ScriptedLlm([call("c1", "transfer_to_agent", {"agent_name": "roll_agent"})])
    roll_model = ScriptedLlm(
        [call("c2", "roll_die", {"sides": 10}), call("c3", "transfer_to_agent", {"agent_name": "prime_agent"})]
    )
    is_prime = check_prime([roll])["result"] != "No prime numbers found."
    verdict = f"{roll} is {'a' if is_prime else 'not a'} prime number."
    prime_model = ScriptedLlm([call("c4", "check_prime", {"nums": [roll]}), scripted_turn(Chunk(text_delta=verdict))])
    roll_agent = LlmAgent(
        "roll_agent",
        roll_model,
        description="Handles rolling dice of different sizes.",
        instruction=(
            "You are responsible for rolling dice based on the user's request.\n\nWhen asked to roll a die, you "
            "must call the roll_die tool with the number of sides as an integer.\n"
        ),
        tools=[roll_die],
    )
    prime_agent = LlmAgent(
        "prime_agent",
        prime_model,
        description="Handles checking if numbers are prime.",
        instruction=(
            "You are responsible for checking whether numbers are prime.\nWhen asked to check primes, you must call "
            "the check_prime tool with a list of integers.\nNever attempt to determine prime numbers manually.\n"
            "Return the prime number results to the root agent.\n"
        ),
        tools=[check_prime],
    )
    root = LlmAgent(
        "root_agent",
        root_model,
        description="Coordinator agent to greet users.",
        instruction=(
            "You are a helpful assistant that can roll dice and check if numbers are prime.\n\n"
            "You delegate rolling dice tasks to the roll_agent and prime checking tasks to the prime_agent.\n"
        ),
        sub_agents=[roll_agent, prime_agent],
        tools=[EXAMPLE_TOOL],
    )
    return root, root_model, roll_model, prime_model


def describe(event: Event) -> str:
    for call_ in event.function_calls():
        if call_.name == "transfer_to_agent":
            return f"{event.author} -> transfer to {call_.args['agent_name']}"
        return f"{event.author} calls {call_.name}({json.dumps(dict(call_.args))})"
    for response in event.function_responses():
        return f"{event.author} <- {response.name}: {json.dumps(dict(response.response))}"
    return f"{event.author}: {event.text()}"


def main() -> int:
    roll = random.Random(3).randint(1, 10)  # what DICE will roll first
    root, root_model, roll_model, prime_model = agents(roll)
    runner = InMemoryRunner(root, app_name="dice")
    runner.session_service.create_session("dice", "u1", session_id="s1").run()
    prompt = "Roll a 10-sided die and check if it's prime."
    print(f"You> {prompt}")
    events: list[Event] = runner.run_async("u1", "s1", Content(role="user", parts=(Part.from_text(prompt),))).pipe(
        ops.to_list()
    ).run()
    for event in events:
        print("  " + describe(event))

    def instruction(model: ScriptedLlm) -> str:
        system = model.requests[0][0].config.system_instruction
        return system.text() if system is not None else ""

    root_instruction = instruction(root_model)
    shown = root_instruction.count("Begin example")
    print(f"few-shot examples in root_agent's instruction: {shown}")
    print("  " + root_instruction[root_instruction.index("EXAMPLE 3:"):].split("End example")[0].replace("\n", " | "))
    declared = [d.name for d in root_model.requests[0][0].config.function_declarations()]
    print(f"root_agent offers: {declared}")
    state = runner.session_service.get_session("dice", "u1", "s1").run().state
    ok = (
        shown == 3
        and "[user]\nI rolled an 8 for you.\n[user]\n8 is not a prime number.\n" in root_instruction
        and "Begin few-shot" not in instruction(roll_model) + instruction(prime_model)
        and declared == ["transfer_to_agent"]
        and state.get("rolls") == [roll]
        and events[-1].author == "prime_agent"
        and events[-1].text().startswith(str(roll))
    )
    print("dice/prime: OK" if ok else "dice/prime: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
