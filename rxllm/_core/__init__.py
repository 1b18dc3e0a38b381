"""The core: the exception tree, the ADK/genai types, response schemas, JSON, redaction, threads,
the version, and ``publish`` (the public ``__module__`` of the front doors' names).

The lowest room: it imports nothing else of rxllm, and every other room may import it.
"""
