"""Flows (ADK's ``flows/llmflows``): the model-and-tools loop of an ``LlmAgent``, its request contents,
instructions and agent transfer.
"""
