"""Flows (ADK's ``flows/llmflows``): the model-and-tools loop of an ``LlmAgent``, its request
contents, instructions, output schema and agent transfer.

Imports ``_invocation``, ``_sessions`` and ``_artifacts``, the tool layer, ``_models`` and
``_telemetry``; it
sees the agent it runs through the ``FlowAgent`` protocol, never ``_agents``.
"""
