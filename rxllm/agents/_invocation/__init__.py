"""The invocation (ADK's ``InvocationContext``, ``BaseAgent``, ``BasePlugin``): one run of an agent
tree, the agent contract, plugins and callback chains, ``RunConfig``.

Imports ``_sessions``, ``_artifacts`` and ``_memory`` (the run's services), the tool layer and
``_telemetry``;
the flows, the concrete agents and the runner stand on it.
"""
