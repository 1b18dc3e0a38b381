"""The runner (ADK's ``Runner``): one invocation from a user message to stored events, which agent
answers a turn (``findAgentToRun``), and ``AgentTool``.

The top sub-room: it may import every other one.
"""
