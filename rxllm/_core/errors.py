"""rxllm's one exception tree.

Every error rxllm raises or emits through ``on_error`` is an :class:`RxLlmError`.
Foreign exceptions (httpx, json, pydantic) are mapped where they enter, with the
original chained as ``__cause__``. Errors carry context (provider, HTTP status,
request id, ``Retry-After``) and never secrets. Misuse errors also subclass the
matching built-in, so ``except ValueError`` keeps working for callers who expect it::

    RxLlmError
    ├── ConfigurationError (ValueError)          bad arguments, missing API key
    ├── UnsupportedOperationError (NotImplementedError)
    │                                            connect() on a model without live sessions
    ├── TransportError                           connection failed, reset, timed out
    │   ├── StreamInterruptedError               body ended before the provider said it was done
    │   │   └── WebSocketClosedError             the server closed a WebSocket with an error code
    │   └── StreamTimeoutError                   a deadline fired (``limit`` says which one)
    ├── HttpStatusError                          non-2xx answer: status, message, request id
    ├── ProviderError                            the provider reported an error inside the body
    ├── ProtocolError (ValueError)               bytes/JSON/shape the protocol does not allow
    │   ├── LineTooLongError                     an SSE line longer than the decoder's cap
    │   ├── EventTooLargeError                   an SSE event (all its lines) larger than its cap
    │   ├── MalformedFunctionCallError           tool-call arguments that are not a JSON object
    │   └── ContractViolationError               a stream broke the generate_content contract
    │   └── StructuredOutputError                no validated object of the type asked for
    ├── BufferOverflowError                      a subscriber fell further behind than its buffer
    ├── EmptyStreamError                         awaited the last item of a stream that had none
    ├── EventLoopError (RuntimeError)            an await or a blocking wait that cannot complete
    │                                            on this thread's event loop (or with none running)
    ├── LimitExceededError                       a run exceeded a configured limit (max_llm_calls)
    │   └── ResponseTooLargeError                a body (decompressed) grew past its size cap
    ├── ToolError                                a tool could not be found, validated or run
    │   └── ToolTimeoutError (TimeoutError)      a tool ran past its timeout
    ├── StoreError                               a session/artifact/memory store failed (database
    │                                            error, connection lost); the next call reconnects
    └── GuardrailError                           an output guardrail rejected the answer

``retryable`` says whether the error may be retried *before the first item was emitted*;
nothing is ever retried after it (see :class:`rxllm.RetryPolicy`).
"""

from __future__ import annotations

__all__ = [
    "BufferOverflowError",
    "ConfigurationError",
    "ContractViolationError",
    "EmptyStreamError",
    "EventLoopError",
    "EventTooLargeError",
    "GuardrailError",
    "HttpStatusError",
    "LimitExceededError",
    "LineTooLongError",
    "MalformedFunctionCallError",
    "ProtocolError",
    "ProviderError",
    "ResponseTooLargeError",
    "RxLlmError",
    "StoreError",
    "StreamInterruptedError",
    "StreamTimeoutError",
    "StructuredOutputError",
    "ToolError",
    "ToolTimeoutError",
    "TransportError",
    "UnsupportedOperationError",
    "WebSocketClosedError",
]


class RxLlmError(Exception):
    """Root of every error rxllm raises.

    Attributes:
        provider: the provider's short name (``"openai"``, ``"anthropic"``, ...) when known.
        retryable: whether a retry *before the first emitted item* may succeed.
    """

    retryable: bool = False

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider

    def __str__(self) -> str:
        return f"[{self.provider}] {self.message}" if self.provider else self.message

    def __reduce__(self) -> tuple[object, ...]:
        # Exception's own pickling calls ``type(self)(*self.args)``, which a subclass with other (or
        # keyword-only) arguments refuses; rebuild from the args and attributes instead, so an error
        # crosses a process boundary (a process pool, a task queue) whole.
        return (_restore_error, (type(self), self.args, self.__dict__))


def _restore_error(cls: type[RxLlmError], args: tuple[object, ...], state: dict[str, object]) -> RxLlmError:
    """An unpickled :class:`RxLlmError`: ``args`` and attributes as pickled, ``__init__`` not called."""
    error = cls.__new__(cls, *args)
    error.args = args  # OSError's __new__ (TimeoutError's) leaves them to __init__
    error.__dict__.update(state)
    return error


class ConfigurationError(RxLlmError, ValueError):
    """A constructor or call got arguments it cannot work with (e.g. no API key)."""


class UnsupportedOperationError(RxLlmError, NotImplementedError):
    """The operation is not offered by this object, e.g. ``connect()`` on an SSE-only model."""


class TransportError(RxLlmError):
    """The connection could not be made, was reset, or timed out.

    Retryable by default: before the first emitted item a fresh attempt may succeed.
    """

    retryable = True


class StreamInterruptedError(TransportError):
    """The body ended (EOF or reset) before the provider said the stream was complete."""


class WebSocketClosedError(StreamInterruptedError):
    """The server ended a WebSocket session with a close code other than a normal closure.

    Attributes:
        code: the close code the server sent (RFC 6455 §7.4: ``1001`` going away, ``1008``
            policy violation, ``1011`` internal error, ``4000``-``4999`` the application's own).
        reason: the close frame's reason text (secrets cut out).
        retryable: ``True`` for the codes that say "try again" (``1001``, ``1011``-``1014``).

    >>> err = WebSocketClosedError(1011, "overloaded")
    >>> (str(err), err.code, err.retryable, isinstance(err, StreamInterruptedError))
    ('the server closed the WebSocket with code 1011: overloaded', 1011, True, True)
    """

    RETRYABLE_CODES = frozenset({1001, 1011, 1012, 1013, 1014})

    def __init__(self, code: int, reason: str = "", *, provider: str | None = None) -> None:
        detail = f"the server closed the WebSocket with code {code}"
        super().__init__(f"{detail}: {reason}" if reason else detail, provider=provider)
        self.code = code
        self.reason = reason
        self.retryable: bool = code in self.RETRYABLE_CODES


class StreamTimeoutError(TransportError):
    """A deadline fired before the stream (or the step waiting on it) finished.

    Attributes:
        limit: which limit fired, e.g. ``"connect"``, ``"first_byte"``, ``"read"`` (silence
            between chunks), ``"total"`` (the whole attempt), ``"pool"``, ``"write"``; operators
            may use their own names (``"idle"``, ...).
        retryable: whether a retry before the first emitted item may succeed. Per instance:
            a ``"total"`` deadline, for example, is not retried by default.

    >>> err = StreamTimeoutError("no byte within 30 s", limit="first_byte")
    >>> (err.limit, err.retryable, isinstance(err, TransportError))
    ('first_byte', True, True)
    """

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        retryable: bool = True,
        provider: str | None = None,
    ) -> None:
        super().__init__(message, provider=provider)
        self.limit = limit
        self.retryable = retryable


class HttpStatusError(RxLlmError):
    """The provider answered with a non-2xx status.

    Attributes:
        status_code: the HTTP status.
        provider_message: the error message from the provider's error body, if any.
        request_id: the provider's request id header, if any (quote it to support).
        retry_after: seconds from a ``Retry-After`` header, if any.
    """

    RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})

    def __init__(
        self,
        status_code: int,
        *,
        provider_message: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
    ) -> None:
        detail = f"HTTP {status_code}"
        if provider_message:
            detail += f": {provider_message}"
        if request_id:
            detail += f" (request id {request_id})"
        super().__init__(detail, provider=provider)
        self.status_code = status_code
        self.provider_message = provider_message
        self.request_id = request_id
        self.retry_after = retry_after
        self.retryable: bool = status_code in self.RETRYABLE_STATUSES or status_code >= 500


class ProviderError(RxLlmError):
    """The provider reported an error inside the response body (an ``error`` frame).

    Raised only when it arrives before the first emitted item; after that it becomes the
    final response's ``error_code`` / ``error_message`` instead.

    Attributes:
        code: the provider's error type or code (``"overloaded_error"``, ``"tool_use_failed"``...).
        retry_after: seconds to wait, when the provider said.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if code else message, provider=provider)
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after


class ProtocolError(RxLlmError, ValueError):
    """Bytes, JSON or a message shape that the provider's protocol does not allow."""


class LineTooLongError(ProtocolError):
    """An SSE line grew past the decoder's cap without a line end."""


class EventTooLargeError(ProtocolError):
    """The bytes of one SSE event (its data lines and fields together) grew past the decoder's cap
    before a blank line ended the event. Not retried, like every :class:`ProtocolError`."""


class MalformedFunctionCallError(ProtocolError):
    """A streamed tool call's arguments did not parse as a JSON object.

    Attributes:
        tool_name: the function the model tried to call.
        arguments: the raw argument text, as received.
    """

    def __init__(self, tool_name: str, arguments: str, reason: str, *, provider: str | None = None) -> None:
        shown = arguments if len(arguments) <= 200 else arguments[:200] + "…"
        super().__init__(
            f"malformed arguments for tool call {tool_name!r}: {reason}; arguments were {shown!r}",
            provider=provider,
        )
        self.tool_name = tool_name
        self.arguments = arguments


class ContractViolationError(ProtocolError):
    """A stream broke the ``generate_content(stream=True)`` contract (see ``rxllm.operators.check_contract``).

    Attributes:
        rule: the broken invariant's short name: ``"item_after_final"``, ``"partial_function_calls"``,
            ``"partial_usage"``, ``"text_mismatch"``, ``"thought_mismatch"`` or ``"no_final"``.

    >>> ContractViolationError("a partial after the final", rule="item_after_final").rule
    'item_after_final'
    """

    def __init__(self, message: str, *, rule: str, provider: str | None = None) -> None:
        super().__init__(f"stream contract violated ({rule}): {message}", provider=provider)
        self.rule = rule


class StructuredOutputError(ProtocolError):
    """A response holds no validated object of the type asked for (``LlmResponse.parsed_as``).

    The reply did not validate against the response schema, the turn ended otherwise (a
    ``MAX_TOKENS`` cut, a refusal, a tool call), the response is a partial (whose ``parsed`` is
    the JSON so far), or the request had no response schema.

    Attributes:
        error_code: the response's ``error_code`` (``"INVALID_STRUCTURED_OUTPUT"``, ``"MAX_TOKENS"``,
            ...), or ``None``.

    >>> StructuredOutputError("no City", error_code="MAX_TOKENS").error_code
    'MAX_TOKENS'
    """

    def __init__(self, message: str, *, error_code: str | None = None, provider: str | None = None) -> None:
        super().__init__(message, provider=provider)
        self.error_code = error_code


class BufferOverflowError(RxLlmError):
    """A subscriber fell further behind than the bounded buffer allows; nothing was dropped."""


class EmptyStreamError(RxLlmError):
    """``await`` (or :func:`rxllm.aio.last`) on a stream that completed without any item."""


class EventLoopError(RxLlmError, RuntimeError):
    """An ``await`` or a blocking wait (``for`` over :func:`rxllm.iterate`, ``model.stream()``,
    ``.run()``) that could never complete, raised at once instead of hanging; the message says
    what to use instead.

    Raised for a blocking wait on the thread of a running event loop that the stream itself needs
    (an :class:`~rxllm.AsyncHttpTransport` bound to that loop, an ``async def`` tool running there),
    for a stream whose :class:`~rxllm.AsyncHttpTransport` is bound to a loop that is closed, or
    stopped while another loop awaits it, and for an ``await`` with no asyncio loop running.
    """


class LimitExceededError(RxLlmError):
    """A run went past a configured limit (for example ``RunConfig.max_llm_calls``)."""


class ResponseTooLargeError(LimitExceededError):
    """A response body grew past its size cap (decompressed bytes, ``max_response_bytes``).

    Never retried: the same request would produce the same body.

    Attributes:
        limit_bytes: the cap that was exceeded.
    """

    def __init__(self, message: str, *, limit_bytes: int, provider: str | None = None) -> None:
        super().__init__(message, provider=provider)
        self.limit_bytes = limit_bytes


class ToolError(RxLlmError):
    """A tool was not found, its arguments failed validation, or it raised."""


class ToolTimeoutError(ToolError, TimeoutError):
    """A tool ran past its timeout (``FunctionTool(..., timeout=)`` or the runtime's default).

    The model sees it as the call's error result; a synchronous function keeps running on its
    worker (it cannot be interrupted) and its result is dropped; an ``async def`` one is cancelled.
    """


class StoreError(RxLlmError):
    """A session, artifact or memory store failed: a database error, a lost connection, a corrupt row.

    The store stays consistent (the failed write is rolled back) and the next call reconnects.
    """


class GuardrailError(RxLlmError):
    """An output guardrail rejected the final answer."""
