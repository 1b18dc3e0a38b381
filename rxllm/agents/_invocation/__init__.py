"""The invocation (ADK's ``InvocationContext``, ``BaseAgent``, ``BasePlugin``): one run of an agent tree."""
