"""Agent transfer: the ``transfer_to_agent`` tool and whom an agent may hand over to (ADK's
``flows/llmflows/AgentTransfer.java``). Which agent answers a new user turn is the runner's
question (``Runner.findAgentToRun``: ``rxllm.agents._runners.runner``).

An :class:`LlmAgent` may transfer to its sub-agents; to its parent unless
``disallow_transfer_to_parent``; to its parent's other sub-agents unless
``disallow_transfer_to_peers`` (parent and peers only when the parent is an ``LlmAgent``). When it
has a target, its request carries the ``transfer_to_agent`` tool and an instruction listing the
targets. When the model calls it, the function-response event carries
``actions.transfer_to_agent`` and the flow continues with the target agent, in the same invocation.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._tools import FunctionTool, ToolContext
from .._invocation.base import BaseAgent
from .flow_agent import FlowAgent, is_tree_llm_agent

__all__ = ["TRANSFER_DESCRIPTION", "TRANSFER_TOOL", "transfer_instruction", "transfer_targets"]


TRANSFER_DESCRIPTION = (
    "Transfer the question to another agent.\n\n"
    "  This tool hands off control to another agent when it's more suitable to\n"
    "  answer the user's question according to the agent's description.\n\n"
    "  Args:\n"
    "    agent_name: the agent name to transfer to.\n"
    "  "
)
"""The tool's description, character for character ADK Java's (the ``@Schema`` text block on
``AgentTransfer.transferToAgent``, its indentation and trailing spaces included); ``agent_name``
has no description of its own and no ``enum`` (ADK Python lists the targets in an ``enum``)."""


def transfer_to_agent(agent_name: str, tool_context: ToolContext) -> None:
    # The description is TRANSFER_DESCRIPTION: a docstring's Args would become a parameter description.
    tool_context.actions.transfer_to_agent = agent_name


TRANSFER_TOOL = FunctionTool(transfer_to_agent, description=TRANSFER_DESCRIPTION)
"""The ``transfer_to_agent`` tool offered to agents that can transfer."""


def transfer_targets(agent: FlowAgent) -> list[BaseAgent]:
    """Whom ``agent`` may transfer to: sub-agents, then its parent, then peers (ADK's ``getTransferTargets``)."""
    targets: list[BaseAgent] = list(agent.sub_agents)
    parent = agent.parent_agent
    if parent is None or not is_tree_llm_agent(agent.parent_agent):
        return targets  # no parent, or a workflow agent: it takes no part in transfer
    if not agent.disallow_transfer_to_parent:
        targets.append(parent)
    if not agent.disallow_transfer_to_peers:
        targets.extend(peer for peer in parent.sub_agents if peer.name != agent.name)
    return targets


def transfer_instruction(agent: FlowAgent, targets: Sequence[BaseAgent]) -> str:
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
