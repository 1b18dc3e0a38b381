"""Agents (ADK's ``agents/``): ``LlmAgent`` (which holds its flow), the workflow agents
(``SequentialAgent``, ``ParallelAgent``, ``LoopAgent``) and ``LlmRegistry``.

Imports ``_flows``, ``_invocation`` and ``_sessions``; ``LlmRegistry`` imports ``providers`` by
name, when a model name is first resolved.
"""
