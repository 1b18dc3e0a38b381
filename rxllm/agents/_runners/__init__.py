"""The runner (ADK's ``Runner``): one invocation from a user message to stored events, and ``AgentTool``."""
