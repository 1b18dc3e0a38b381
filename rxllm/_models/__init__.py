"""The model layer (ADK's ``models/``): SSE decoding, provider chunks and the provider protocols
(``RequestMapper``, ``ChunkParser``), aggregation into ``LlmResponse``, structured output, retry,
the model-stream events, ``BaseLlm`` and ``SseChatModel``.

Imports ``_core``, ``_rx``, ``_telemetry`` and the transport seam (``_transports``); never a
provider, the tool layer or a runtime.
"""
