"""The core: the exception tree, the ADK/genai types, response schemas, JSON, redaction, threads, version.

The lowest room: it imports nothing else of rxllm, and every other room may import it.
"""
