"""rxllm: LLM responses as ReactiveX Observables, on ADK Java's model contract.

>>> import rxllm
>>> from reactivex import operators as ops
>>> from rxllm.testing import ScriptedLlm, scripted_turn
>>> llm = ScriptedLlm([scripted_turn(rxllm.Chunk(text_delta="Hello"), rxllm.Chunk(text_delta=" world"))])
>>> responses = llm.generate_content(rxllm.LlmRequest(), stream=True).pipe(ops.to_list()).run()
>>> [(r.text(), r.partial) for r in responses]
[('Hello', True), (' world', True), ('Hello world', None)]
"""

import logging as _logging
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from . import aio as aio
from ._core.errors import (
    BufferOverflowError,
    ConfigurationError,
    ContractViolationError,
    EmptyStreamError,
    EventLoopError,
    EventTooLargeError,
    GuardrailError,
    HttpStatusError,
    LimitExceededError,
    LineTooLongError,
    MalformedFunctionCallError,
    ProtocolError,
    ProviderError,
    ResponseTooLargeError,
    RxLlmError,
    StoreError,
    StreamInterruptedError,
    StreamTimeoutError,
    StructuredOutputError,
    ToolError,
    ToolTimeoutError,
    TransportError,
    UnsupportedOperationError,
    WebSocketClosedError,
)
from ._core.genai_types import (
    FunctionCallingConfigMode,
    GoogleSearch,
    HarmBlockMethod,
    HarmBlockThreshold,
    HarmCategory,
    LiveServerGoAway,
    LiveServerSessionResumptionUpdate,
    LiveServerToolCallCancellation,
    SafetySetting,
    ToolCodeExecution,
    Transcription,
    UrlContext,
)
from ._core.public import publish as _publish
from ._core.schema import INVALID_STRUCTURED_OUTPUT, ResponseSchema
from ._core.types import (
    AnthropicServerTool,
    Blob,
    Content,
    FinishReason,
    FunctionCall,
    FunctionCallingConfig,
    FunctionDeclaration,
    FunctionResponse,
    GenerateContentConfig,
    HttpOptions,
    LiveConnectConfig,
    LlmRequest,
    LlmResponse,
    OpenAiFileSearch,
    OpenAiWebSearch,
    Part,
    ThinkingConfig,
    Tool,
    ToolConfig,
    UsageMetadata,
)
from ._core.version import __version__ as __version__
from ._models.aggregation import StreamAggregator
from ._models.base_llm import BaseLlm, BaseLlmConnection, model_stream_events
from ._models.chunk import Chunk, InBandError, ToolCallFragment
from ._models.live_connection import LiveLimits
from ._models.model_stream import (
    ModelStreamEvent,
    ResponseCompleteEvent,
    TextDeltaEvent,
    ThoughtDeltaEvent,
    ToolCallCompleteEvent,
    ToolCallDeltaEvent,
)
from ._models.prompt import Prompt
from ._models.provider import ChunkParser, RequestMapper
from ._models.response_stream import ResponseStream
from ._models.retry import RetryPolicy, retry_before_first_item
from ._models.sse import SseDecoder, SseEvent
from ._models.structured_stream import StructuredStream, structured_responses
from ._rx.blocking import BlockingIterator, iterate
from ._telemetry.otel import configure_telemetry
from ._transports.base import AttemptSink, CancelScope, Exchange, HttpRequest, Transport, TransportLimits

if _TYPE_CHECKING:
    from ._models.sse_chat_model import SseChatModel
    from ._transports.asynchronous import AsyncHttpTransport
    from ._transports.threaded import HttpTransport

_logging.getLogger("rxllm").addHandler(_logging.NullHandler())  # the application decides where logs go

# The names that need an HTTP library load on first use, so that importing rxllm (or its pytest
# plugin) imports no httpx: an application may still call ``httpx2.alias_httpx()`` after it.
_LAZY = {
    "AsyncHttpTransport": "._transports.asynchronous",
    "HttpTransport": "._transports.threaded",
    "SseChatModel": "._models.sse_chat_model",
}


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    _publish(__name__, {name: value}, (name,))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

__all__ = [
    "AnthropicServerTool",
    "AsyncHttpTransport",
    "AttemptSink",
    "BaseLlm",
    "BaseLlmConnection",
    "Blob",
    "BlockingIterator",
    "BufferOverflowError",
    "CancelScope",
    "Chunk",
    "ChunkParser",
    "ConfigurationError",
    "Content",
    "ContractViolationError",
    "EmptyStreamError",
    "EventLoopError",
    "EventTooLargeError",
    "Exchange",
    "FinishReason",
    "FunctionCall",
    "FunctionCallingConfig",
    "FunctionCallingConfigMode",
    "FunctionDeclaration",
    "FunctionResponse",
    "GenerateContentConfig",
    "GoogleSearch",
    "GuardrailError",
    "HarmBlockMethod",
    "HarmBlockThreshold",
    "HarmCategory",
    "HttpOptions",
    "HttpRequest",
    "HttpStatusError",
    "HttpTransport",
    "INVALID_STRUCTURED_OUTPUT",
    "InBandError",
    "LimitExceededError",
    "LineTooLongError",
    "LiveConnectConfig",
    "LiveLimits",
    "LiveServerGoAway",
    "LiveServerSessionResumptionUpdate",
    "LiveServerToolCallCancellation",
    "LlmRequest",
    "LlmResponse",
    "MalformedFunctionCallError",
    "ModelStreamEvent",
    "OpenAiFileSearch",
    "OpenAiWebSearch",
    "Part",
    "Prompt",
    "ProtocolError",
    "ProviderError",
    "RequestMapper",
    "ResponseCompleteEvent",
    "ResponseSchema",
    "ResponseStream",
    "ResponseTooLargeError",
    "RetryPolicy",
    "RxLlmError",
    "SafetySetting",
    "SseChatModel",
    "SseDecoder",
    "SseEvent",
    "StoreError",
    "StreamAggregator",
    "StreamInterruptedError",
    "StreamTimeoutError",
    "StructuredOutputError",
    "StructuredStream",
    "TextDeltaEvent",
    "ThinkingConfig",
    "ThoughtDeltaEvent",
    "Tool",
    "ToolCallCompleteEvent",
    "ToolCallDeltaEvent",
    "ToolCallFragment",
    "ToolCodeExecution",
    "ToolConfig",
    "ToolError",
    "ToolTimeoutError",
    "Transcription",
    "Transport",
    "TransportError",
    "TransportLimits",
    "UnsupportedOperationError",
    "UrlContext",
    "UsageMetadata",
    "WebSocketClosedError",
    "configure_telemetry",
    "iterate",
    "model_stream_events",
    "retry_before_first_item",
    "structured_responses",
]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
