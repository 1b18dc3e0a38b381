"""The model layer (ADK's ``models/``): SSE decoding, provider chunks and protocols, aggregation,
structured output, retry, ``BaseLlm`` and ``SseChatModel``.

Imports ``_core``, ``_rx``, ``_telemetry`` and ``_transports``.
"""
