"""Agent transfer: the ``transfer_to_agent`` tool and whom an agent may hand over to (ADK's
``flows/llmflows/AgentTransfer.java``), and which agent answers a new user turn (``Runner.findAgentToRun``).

An :class:`LlmAgent` may transfer to its sub-agents; to its parent unless
``disallow_transfer_to_parent``; to its parent's other sub-agents unless
``disallow_transfer_to_peers`` (parent and peers only when the parent is an ``LlmAgent``). When it
has a target, its request carries the ``transfer_to_agent`` tool and an instruction listing the
targets. When the model calls it, the function-response event carries
``actions.transfer_to_agent`` and the flow continues with the target agent, in the same invocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..._tools import FunctionTool
from .._agents.context import ToolContext
from .._sessions.event import Event

if TYPE_CHECKING:
    from .._agents.agent import BaseAgent, LlmAgent

__all__ = ["TRANSFER_TOOL", "agent_to_run", "transfer_instruction", "transfer_targets"]


def transfer_to_agent(agent_name: str, tool_context: ToolContext) -> None:
    """Transfer the question to another agent.

    This tool hands off control to another agent when it's more suitable to answer the user's
    question according to the agent's description.

    Args:
        agent_name: the agent name to transfer to.
    """
    tool_context.actions.transfer_to_agent = agent_name


TRANSFER_TOOL = FunctionTool(transfer_to_agent)
"""The ``transfer_to_agent`` tool offered to agents that can transfer."""


def transfer_targets(agent: LlmAgent) -> list[BaseAgent]:
    """Whom ``agent`` may transfer to: sub-agents, then its parent, then peers (ADK's ``getTransferTargets``)."""
    from .._agents.agent import LlmAgent

    targets: list[BaseAgent] = list(agent.sub_agents)
    parent = agent.parent_agent
    if not isinstance(parent, LlmAgent):
        return targets
    if not agent.disallow_transfer_to_parent:
        targets.append(parent)
    if not agent.disallow_transfer_to_peers:
        targets.extend(peer for peer in parent.sub_agents if peer.name != agent.name)
    return targets


def transfer_instruction(agent: LlmAgent, targets: Sequence[BaseAgent]) -> str:
    """The instruction ADK adds for an agent with transfer targets (``buildTargetAgentsInstructions``)."""
    lines = ["", "You have a list of other agents to transfer to:", ""]
    for target in targets:
        lines += ["", f"Agent name: {target.name}", f"Agent description: {target.description}", ""]
    names = ", ".join(sorted(f"`{target.name}`" for target in targets))
    text = "\n".join(lines) + (
        "\n\nIf you are the best to answer the question according to your description, you\n"
        "can answer it.\n\n"
        "If another agent is better for answering the question according to its\n"
        "description, call `transfer_to_agent` function to transfer the\n"
        "question to that agent. When transferring, do not generate any text other than\n"
        f"the function call.\n\n**NOTE**: the only available agents for `transfer_to_agent` function are {names}.\n"
    )
    parent = agent.parent_agent
    if parent is not None and not agent.disallow_transfer_to_parent:
        text += (
            "\nIf neither you nor the other agents are best for the question, transfer to your parent agent "
            f"{parent.name}.\n"
        )
    return text


def _transferable_across_tree(agent: BaseAgent) -> bool:
    from .._agents.agent import LlmAgent

    current: BaseAgent | None = agent
    while current is not None:
        if not isinstance(current, LlmAgent) or current.disallow_transfer_to_parent:
            return False
        current = current.parent_agent
    return True


def agent_to_run(root: BaseAgent, events: Sequence[Event]) -> BaseAgent:
    """The agent that answers a new user message (ADK's ``Runner.findAgentToRun``).

    A user message that answers a function call (a long-running tool's response) goes to the
    agent that made the call. Otherwise the author of the latest agent event, when it is the root
    or an agent from which transfer back up to the root is possible (an ``LlmAgent`` chain that
    allows transfer to the parent); else the root.
    """
    answered = _last_user_function_response_ids(events)
    if answered:
        for event in reversed(events):
            if {c.id for c in event.function_calls()} & answered:
                found = root.find_agent(event.author)
                if found is not None:
                    return found
                break
    for event in reversed(events):
        if event.author == "user":
            continue
        if event.author == root.name:
            return root
        agent = root.find_sub_agent(event.author)
        if agent is not None and _transferable_across_tree(agent):
            return agent
    return root


def _last_user_function_response_ids(events: Sequence[Event]) -> set[str]:
    if not events or events[-1].author != "user":
        return set()
    return {r.id for r in events[-1].function_responses() if r.id}
