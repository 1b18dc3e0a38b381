"""The exception tree, HttpStatusError's retry judgement and message, and connect()'s refusal."""

from __future__ import annotations

import inspect

import pytest
import reactivex

import rxllm
from rxllm import (
    BaseLlm,
    BufferOverflowError,
    ConfigurationError,
    GuardrailError,
    HttpStatusError,
    LimitExceededError,
    LineTooLongError,
    LlmRequest,
    LlmResponse,
    MalformedFunctionCallError,
    ProtocolError,
    ProviderError,
    RxLlmError,
    StreamInterruptedError,
    ToolError,
    ToolTimeoutError,
    TransportError,
    UnsupportedOperationError,
)
from rxllm._core.errors import WebSocketClosedError
from rxllm.testing import ScriptedLlm


def _exported_exceptions() -> list[type[BaseException]]:
    values = [getattr(rxllm, name) for name in rxllm.__all__]
    return [v for v in values if inspect.isclass(v) and issubclass(v, BaseException)]


def test_every_exported_exception_is_an_rxllm_error() -> None:
    exceptions = _exported_exceptions()
    assert len(exceptions) >= 14
    assert all(issubclass(e, RxLlmError) for e in exceptions), [e for e in exceptions if not issubclass(e, RxLlmError)]


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (ConfigurationError, (RxLlmError, ValueError)),
        (UnsupportedOperationError, (RxLlmError, NotImplementedError)),
        (TransportError, (RxLlmError,)),
        (StreamInterruptedError, (TransportError,)),
        (WebSocketClosedError, (StreamInterruptedError, TransportError)),
        (rxllm.StreamTimeoutError, (TransportError,)),
        (rxllm.ResponseTooLargeError, (LimitExceededError,)),
        (HttpStatusError, (RxLlmError,)),
        (ProviderError, (RxLlmError,)),
        (ProtocolError, (RxLlmError, ValueError)),
        (LineTooLongError, (ProtocolError, ValueError)),
        (rxllm.EventTooLargeError, (ProtocolError, ValueError)),
        (MalformedFunctionCallError, (ProtocolError, ValueError)),
        (rxllm.StructuredOutputError, (ProtocolError, ValueError)),
        (BufferOverflowError, (RxLlmError,)),
        (LimitExceededError, (RxLlmError,)),
        (ToolError, (RxLlmError,)),
        (ToolTimeoutError, (ToolError, TimeoutError)),
        (GuardrailError, (RxLlmError,)),
    ],
)
def test_tree(error: type[Exception], bases: tuple[type[Exception], ...]) -> None:
    for base in bases:
        assert issubclass(error, base)


@pytest.mark.parametrize(
    ("code", "retryable"), [(1001, True), (1011, True), (1013, True), (1002, False), (1008, False), (4000, False)]
)
def test_websocket_closed_error_carries_the_code_and_judges_retry_by_it(code: int, retryable: bool) -> None:
    error = WebSocketClosedError(code, "why", provider="gemini")
    assert (error.code, error.reason, error.retryable) == (code, "why", retryable)
    assert str(error) == f"[gemini] the server closed the WebSocket with code {code}: why"
    assert str(WebSocketClosedError(code)) == f"the server closed the WebSocket with code {code}"


def test_rxllm_error_message_and_provider() -> None:
    plain = RxLlmError("went wrong")
    assert str(plain) == "went wrong"
    assert plain.message == "went wrong"
    assert plain.provider is None
    assert plain.retryable is False
    tagged = ConfigurationError("no API key", provider="openai")
    assert str(tagged) == "[openai] no API key"
    with pytest.raises(ValueError, match="no API key"):
        raise tagged


def test_transport_errors_are_retryable_by_default() -> None:
    assert TransportError("reset").retryable is True
    assert StreamInterruptedError("eof").retryable is True
    assert ProtocolError("bad json").retryable is False


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 599])
def test_http_status_retryable(status: int) -> None:
    assert HttpStatusError(status).retryable is True


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_http_status_not_retryable(status: int) -> None:
    assert HttpStatusError(status).retryable is False


def test_http_status_message_carries_context() -> None:
    error = HttpStatusError(
        429, provider_message="Rate limit reached", request_id="req_123", retry_after=2.5, provider="openai"
    )
    message = str(error)
    assert "429" in message
    assert "Rate limit reached" in message
    assert "req_123" in message
    assert message.startswith("[openai]")
    assert (error.status_code, error.provider_message, error.request_id, error.retry_after) == (
        429,
        "Rate limit reached",
        "req_123",
        2.5,
    )


def test_http_status_message_without_extras() -> None:
    assert str(HttpStatusError(503)) == "HTTP 503"


def test_provider_error_fields() -> None:
    error = ProviderError("Overloaded", code="overloaded_error", retryable=True, retry_after=1.0, provider="anthropic")
    assert str(error) == "[anthropic] overloaded_error: Overloaded"
    assert error.retryable is True
    assert error.code == "overloaded_error"
    assert error.retry_after == 1.0
    assert ProviderError("x").retryable is False


def test_malformed_function_call_error_clips_long_arguments() -> None:
    arguments = '{"a": "' + "x" * 1000
    error = MalformedFunctionCallError("get_order", arguments, "Unterminated string")
    assert error.arguments == arguments
    assert error.tool_name == "get_order"
    assert "'get_order'" in str(error)
    assert "Unterminated string" in str(error)
    assert len(str(error)) < 400


# --- connect() -------------------------------------------------------------------------------------------------


class _TinyLlm(BaseLlm):
    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        return reactivex.just(LlmResponse())


@pytest.mark.parametrize(
    "llm", [_TinyLlm(model="tiny-1"), ScriptedLlm([], model="tiny-1")], ids=["subclass", "scripted"]
)
def test_connect_default_refuses_at_call_time_naming_the_model(llm: BaseLlm) -> None:
    with pytest.raises(UnsupportedOperationError, match="tiny-1") as info:
        llm.connect(LlmRequest())
    assert isinstance(info.value, NotImplementedError)
    assert type(llm).__name__ in str(info.value)


def test_base_llm_is_abstract() -> None:
    with pytest.raises(TypeError):
        BaseLlm(model="x")  # type: ignore[abstract]


def test_stream_timeout_error_says_which_limit_and_whether_retried() -> None:
    retried = rxllm.StreamTimeoutError("no first byte", limit="first_byte")
    final = rxllm.StreamTimeoutError("deadline", limit="total", retryable=False, provider="openai")
    assert (retried.limit, retried.retryable) == ("first_byte", True)
    assert (final.limit, final.retryable, str(final)) == ("total", False, "[openai] deadline")


def test_response_too_large_is_never_retryable() -> None:
    err = rxllm.ResponseTooLargeError("body over 10 bytes", limit_bytes=10)
    assert (err.retryable, err.limit_bytes) == (False, 10)
