"""Agents (ADK's ``agents/``): ``BaseAgent``, ``LlmAgent``, workflow agents, contexts, callbacks, plugins."""
