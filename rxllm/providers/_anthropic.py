"""Anthropic Messages API: the stream parser and the request mapper (pure, no I/O).

Stream events (``/v1/messages`` with ``stream: true``) and what each becomes:

- ``message_start`` → usage (``message.usage``), ``model`` → ``model_version`` and ``id`` →
  ``response_id``.
- ``content_block_start``: ``tool_use`` → a :class:`~rxllm.ToolCallFragment` with id and name;
  ``redacted_thinking`` → ``Chunk(redacted_thought=data)``; ``text`` / ``thinking`` → their initial
  text, if any; other block types (server tools, search results) are tracked, their deltas ignored.
- ``content_block_delta``: ``text_delta`` → ``text_delta``; ``thinking_delta`` → ``thought_delta``;
  ``signature_delta`` → ``thought_signature``; ``input_json_delta`` → an argument fragment;
  unknown delta types (``citations_delta``) → nothing.
- ``content_block_stop`` of a ``tool_use`` block → a ``complete=True`` fragment.
- ``message_delta`` → ``stop_reason`` as finish reason; its ``usage`` laid over the start usage.
- ``message_stop`` → ``end_of_stream``; ``error`` → an :class:`~rxllm.InBandError` (``error.type``
  as code) and ``end_of_stream``; ``ping`` and unknown events → nothing.

Signatures and redacted-thinking data are carried as the UTF-8 bytes of the provider's string,
so they go back to the provider exactly as received.

Usage mapping (one documented choice): ``prompt_token_count`` counts every input token the
model read, ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` (Anthropic
reports the three apart; genai's prompt count includes cached tokens);
``cached_content_token_count = cache_read_input_tokens``; ``candidates_token_count =
output_tokens`` (thinking included: Anthropic does not report it apart); ``total_token_count``
is their sum.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from .._core.errors import ConfigurationError, ProtocolError
from .._core.genai_types import FunctionCallingConfigMode
from .._core.json_codec import loads
from .._core.schema import output_schema
from .._core.types import (
    AnthropicServerTool,
    Content,
    FinishReason,
    FunctionDeclaration,
    GenerateContentConfig,
    LlmRequest,
    Part,
    UsageMetadata,
)
from .._models.chunk import Chunk, InBandError, ToolCallFragment
from .._models.sse import SseEvent
from .._transports.base import HttpRequest
from ._wire import (
    CallIdPairing,
    ConfigField,
    JsonRequestMapper,
    KeptByConfig,
    KeptJson,
    ParametersSlot,
    ToolChoice,
    WireReader,
    body_json,
    built_in_tools,
    check_gemini_only_options,
    in_band_error,
    json_text,
    kept_members,
    refuse_built_in,
    render_kept,
    system_text,
    tool_choice,
    wire_config,
)

__all__ = [
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_VERSION",
    "AnthropicChunkParser",
    "AnthropicRequestMapper",
    "map_anthropic_stop_reason",
    "map_anthropic_usage",
]

PROVIDER = "anthropic"
_API = "Anthropic"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"

_wire = WireReader(PROVIDER)

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.STOP,
    "pause_turn": FinishReason.STOP,
    "max_tokens": FinishReason.MAX_TOKENS,
    "model_context_window_exceeded": FinishReason.MAX_TOKENS,
    "refusal": FinishReason.SAFETY,
}

_RETRYABLE_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})

_TEXT, _THINKING, _REDACTED, _TOOL_USE = "text", "thinking", "redacted_thinking", "tool_use"
# Which block type each delta type belongs to; a delta on a block of another known type is a protocol error.
_DELTA_BLOCK = {
    "text_delta": _TEXT,
    "thinking_delta": _THINKING,
    "signature_delta": _THINKING,
    "input_json_delta": _TOOL_USE,
}
_KNOWN_BLOCKS = frozenset({_TEXT, _THINKING, _REDACTED, _TOOL_USE})

_USAGE_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
_tuple_new = tuple.__new__


def map_anthropic_stop_reason(stop_reason: str) -> FinishReason:
    """The :class:`~rxllm.FinishReason` for an Anthropic ``stop_reason``.

    ``end_turn``, ``stop_sequence``, ``tool_use`` and ``pause_turn`` are normal stops;
    ``max_tokens`` and ``model_context_window_exceeded`` hit a limit; ``refusal`` is a safety stop;
    anything else is ``OTHER``.

    >>> map_anthropic_stop_reason("tool_use"), map_anthropic_stop_reason("refusal")
    (<FinishReason.STOP: 'STOP'>, <FinishReason.SAFETY: 'SAFETY'>)
    """
    return _STOP_REASONS.get(stop_reason, FinishReason.OTHER)


def map_anthropic_usage(usage: Mapping[str, object]) -> UsageMetadata | None:
    """A raw Anthropic ``usage`` object as :class:`~rxllm.UsageMetadata` (see the module docstring).

    Returns ``None`` when it holds no token count at all. Missing or ``null`` counts are treated
    as absent.

    Raises:
        ProtocolError: when a count is not a non-negative integer.

    >>> u = map_anthropic_usage({"input_tokens": 20, "cache_read_input_tokens": 5, "output_tokens": 7})
    >>> u.prompt_token_count, u.candidates_token_count, u.total_token_count, u.cached_content_token_count
    (25, 7, 32, 5)
    """
    counts = {key: _wire.count_at(usage, key, "usage") for key in _USAGE_KEYS}
    inputs = [counts[k] for k in _USAGE_KEYS[:3] if counts[k] is not None]
    prompt = sum(c for c in inputs if c is not None) if inputs else None
    output = counts["output_tokens"]
    if prompt is None and output is None:
        return None
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=output,
        total_token_count=(prompt or 0) + (output or 0),
        cached_content_token_count=counts["cache_read_input_tokens"],
    )


def _in_band_error(payload: Mapping[str, object]) -> InBandError:
    """The ``error`` object of an error event or body (its ``type`` is the code)."""
    return in_band_error(payload.get("error"), code_keys=("type",), retryable_codes=_RETRYABLE_ERRORS)


def _finish_chunk(stop_reason: str | None, usage: UsageMetadata | None, *, end: bool = False) -> Chunk:
    return Chunk(
        finish_reason=map_anthropic_stop_reason(stop_reason) if stop_reason is not None else None,
        raw_finish_reason=stop_reason,
        usage=usage,
        end_of_stream=end,
    )


# --------------------------------------------------------------------------------------------
# the parser


class AnthropicChunkParser:
    """Turns Anthropic Messages stream events into :class:`~rxllm.Chunk` (one parser per stream).

    Per-stream state: the type of each open content block (a delta or stop for a block that was
    never started is a :class:`~rxllm.ProtocolError`), the ``message_start`` usage that
    ``message_delta`` usage is laid over, and, for each ``tool_use`` block, whether its input
    arrived as deltas.

    >>> from rxllm import SseEvent
    >>> p = AnthropicChunkParser()
    >>> p.parse(SseEvent("content_block_start",
    ...     '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'))
    >>> p.parse(SseEvent("content_block_delta",
    ...     '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}   }')).text_delta
    'Hi'
    >>> p.parse(SseEvent("ping", '{"type": "ping"}')) is None
    True
    """

    __slots__ = ("_blocks", "_start_inputs", "_tools_with_deltas", "_usage")

    def __init__(self) -> None:
        self._blocks: dict[int, str] = {}  # open block index -> block type
        self._usage: dict[str, object] = {}
        self._tools_with_deltas: set[int] = set()
        self._start_inputs: dict[int, str] = {}  # a tool_use block's non-empty start input, as JSON

    def parse(self, event: SseEvent) -> Chunk | None:
        """The chunk for one stream event, or ``None`` for events that carry nothing.

        Raises:
            ProtocolError: for bad JSON, a wrong shape, or a block index that is not open.
        """
        name = event[0]
        try:
            payload = loads(event[1])
        except (ValueError, TypeError):
            payload = None
        if type(payload) is not dict:
            try:
                payload = _wire.decode_object(event.data, f"{name} event")  # raises the ProtocolError
            except ProtocolError:
                if name != "error":
                    raise
                message = event.data[:500] or "the provider reported an error"
                return Chunk(error=InBandError(message), end_of_stream=True)
        kind = payload.get("type")
        if kind == "content_block_delta" and name != "error":  # the hot path: a text delta, checked inline
            delta = payload.get("delta")
            if type(delta) is dict and delta.get("type") == "text_delta":
                index = payload.get("index")
                text = delta.get("text")
                if type(index) is int and type(text) is str and self._blocks.get(index) == _TEXT:
                    if not text:
                        return None
                    # text_chunk(text) without its frame (tests/test_chunk_fast_paths.py)
                    return _tuple_new(
                        Chunk, (text, None, (), None, None, None, None, None, None, None, None, None, False, None)
                    )
            return self._delta(payload)
        if name == "error" or kind == "error":
            return Chunk(error=_in_band_error(payload), end_of_stream=True)
        if not isinstance(kind, str):
            kind = name
        if kind == "content_block_delta":
            return self._delta(payload)
        if kind == "content_block_start":
            return self._block_start(payload)
        if kind == "content_block_stop":
            return self._block_stop(payload)
        if kind == "message_start":
            return self._message_start(payload)
        if kind == "message_delta":
            return self._message_delta(payload)
        if kind == "message_stop":
            return Chunk(end_of_stream=True)
        return None  # ping, and events added after this parser was written

    def parse_response(self, body: bytes) -> Sequence[Chunk]:
        """The chunks of a non-streamed Messages response (or of an ``{"type":"error"}`` body).

        Raises:
            ProtocolError: for bad JSON or a wrong shape.
        """
        message = _wire.decode_object(body, "response body")
        if message.get("type") == "error":
            return [Chunk(error=_in_band_error(message), end_of_stream=True)]
        content = message.get("content")
        if not isinstance(content, list):
            raise _wire.wrong("response body.content", "an array", content)
        usage_obj = _wire.usage_object_at(message, "usage", "response body")
        chunks = [
            Chunk(
                model_version=_wire.optional_string_at(message, "model", "response body"),
                response_id=_wire.optional_string_at(message, "id", "response body"),
            )
        ]
        for index, block in enumerate(content):
            where = f"content block {index}"
            if not isinstance(block, dict):
                raise _wire.wrong(f"response body.content[{index}]", "an object", block)
            kind = _wire.string_at(block, "type", where)
            if kind == _TEXT:
                chunks.append(Chunk(text_delta=_wire.string_at(block, "text", where)))
            elif kind == _THINKING:
                signature = _wire.optional_string_at(block, "signature", where)
                chunks.append(
                    Chunk(
                        thought_delta=_wire.string_at(block, "thinking", where),
                        thought_signature=signature.encode() if signature else None,
                    )
                )
            elif kind == _REDACTED:
                chunks.append(Chunk(redacted_thought=_wire.string_at(block, "data", where).encode()))
            elif kind == _TOOL_USE:
                fragment = ToolCallFragment(
                    index,
                    id=_wire.string_at(block, "id", where),
                    name=_wire.string_at(block, "name", where),
                    arguments_delta=json_text(_wire.object_at(block, "input", where)),
                    complete=True,
                )
                chunks.append(Chunk(tool_call_fragments=(fragment,)))
        usage = map_anthropic_usage(usage_obj) if usage_obj is not None else None
        chunks.append(_finish_chunk(_wire.optional_string_at(message, "stop_reason", "response body"), usage, end=True))
        return chunks

    # -- events ---------------------------------------------------------------------------

    def _message_start(self, payload: dict[str, object]) -> Chunk:
        message = _wire.object_at(payload, "message", "message_start")
        usage = _wire.usage_object_at(message, "usage", "message_start.message")
        self._usage = dict(usage) if usage is not None else {}
        return Chunk(
            usage=map_anthropic_usage(self._usage),
            model_version=_wire.optional_string_at(message, "model", "message_start.message"),
            response_id=_wire.optional_string_at(message, "id", "message_start.message"),
        )

    def _message_delta(self, payload: dict[str, object]) -> Chunk:
        delta = _wire.object_at(payload, "delta", "message_delta")
        stop_reason = _wire.optional_string_at(delta, "stop_reason", "message_delta.delta")
        usage = _wire.usage_object_at(payload, "usage", "message_delta")
        if usage is not None:
            self._usage.update(usage)
        return _finish_chunk(stop_reason, map_anthropic_usage(self._usage) if usage is not None else None)

    def _block_start(self, payload: dict[str, object]) -> Chunk | None:
        where = "content_block_start"
        index = _wire.index_at(payload, "index", where)
        block = _wire.object_at(payload, "content_block", where)
        kind = _wire.string_at(block, "type", f"{where}.content_block")
        if index in self._blocks:
            raise ProtocolError(f"{where}: content block {index} started twice", provider=PROVIDER)
        self._blocks[index] = kind
        where = f"{where}.content_block"
        if kind == _TEXT:
            text = _wire.optional_string_at(block, "text", where)
            return Chunk(text_delta=text) if text else None
        if kind == _THINKING:
            thinking = _wire.optional_string_at(block, "thinking", where)
            return Chunk(thought_delta=thinking) if thinking else None
        if kind == _REDACTED:
            return Chunk(redacted_thought=_wire.string_at(block, "data", where).encode())
        if kind == _TOOL_USE:
            start_input = _wire.optional_object_at(block, "input", where)
            if start_input:  # streamed calls start with {}; keep a non-empty one in case no delta follows
                self._start_inputs[index] = json_text(start_input)
            fragment = ToolCallFragment(
                index, id=_wire.string_at(block, "id", where), name=_wire.string_at(block, "name", where)
            )
            return Chunk(tool_call_fragments=(fragment,))
        return None

    def _delta(self, payload: dict[str, object]) -> Chunk | None:
        where = "content_block_delta"
        index = _wire.index_at(payload, "index", where)
        block_type = self._blocks.get(index)
        if block_type is None:
            raise ProtocolError(f"{where}: content block {index} is not open", provider=PROVIDER)
        delta = _wire.object_at(payload, "delta", where)
        kind = _wire.string_at(delta, "type", f"{where}.delta")
        expected_block = _DELTA_BLOCK.get(kind)
        if expected_block is None or block_type not in _KNOWN_BLOCKS:
            return None  # citations_delta and the like; deltas of server-side blocks
        if expected_block != block_type:
            raise ProtocolError(f"{where}: a {kind} for {block_type} block {index}", provider=PROVIDER)
        where = f"{where}.delta"
        if kind == "text_delta":
            text = _wire.string_at(delta, "text", where)
            return Chunk(text_delta=text) if text else None
        if kind == "thinking_delta":
            thinking = _wire.string_at(delta, "thinking", where)
            return Chunk(thought_delta=thinking) if thinking else None
        if kind == "signature_delta":
            signature = _wire.string_at(delta, "signature", where)
            return Chunk(thought_signature=signature.encode()) if signature else None
        partial = _wire.string_at(delta, "partial_json", where)
        self._tools_with_deltas.add(index)
        return Chunk(tool_call_fragments=(ToolCallFragment(index, arguments_delta=partial),)) if partial else None

    def _block_stop(self, payload: dict[str, object]) -> Chunk | None:
        index = _wire.index_at(payload, "index", "content_block_stop")
        block_type = self._blocks.pop(index, None)
        if block_type is None:
            raise ProtocolError(f"content_block_stop: content block {index} is not open", provider=PROVIDER)
        if block_type != _TOOL_USE:
            return None
        start_input = self._start_inputs.pop(index, "")
        arguments = start_input if index not in self._tools_with_deltas else ""
        return Chunk(tool_call_fragments=(ToolCallFragment(index, arguments_delta=arguments, complete=True),))


# --------------------------------------------------------------------------------------------
# the request mapper


class _Message:
    __slots__ = ("first", "rest", "role")

    def __init__(self, role: str) -> None:
        self.role = role
        self.first: list[dict[str, object]] = []  # thinking blocks (assistant) / tool results (user)
        self.rest: list[dict[str, object]] = []

    def to_json(self) -> dict[str, object]:
        return {"role": self.role, "content": [*self.first, *self.rest]}


_CONFIG_FIELDS: tuple[tuple[ConfigField, str], ...] = (
    ("stop_sequences", "stop_sequences"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
)
_ROLES = {"user": "user", "tool": "user", "function": "user", "model": "assistant", "assistant": "assistant"}


class AnthropicRequestMapper(JsonRequestMapper):
    """Builds ``POST {base_url}/v1/messages`` requests from an :class:`~rxllm.LlmRequest`.

    Args:
        base_url: the API root, without ``/v1``.
        api_key: sent as ``x-api-key``; ``None`` sends no key (for a gateway that adds it). Never
            shown in a repr, log or error.
        max_tokens: ``max_tokens`` when the request's ``max_output_tokens`` is unset (Anthropic
            requires one). With a thinking budget at or above it, the budget is added to it.
        anthropic_version: the ``anthropic-version`` header.
        extra_headers: more headers (``anthropic-beta``...), sent as given; each replaces a default
            header of the same name, in any letter case.
        extra_body: more body members for every request, merged as :class:`JsonRequestMapper` says
            (the request's ``http_options.extra_body`` is merged over it).
        extra_body_overrides: whether ``extra_body`` values replace rxllm's own.

    Mapping: the system instruction (and any ``system``-role content) becomes ``system``;
    contents become strictly alternating ``user`` / ``assistant`` messages (consecutive turns of
    one role are merged); function responses become ``tool_result`` blocks, first in their user
    message, with the response object as JSON text; function calls become ``tool_use`` blocks;
    a thought part with text and a signature becomes a ``thinking`` block and one with only a
    signature a ``redacted_thinking`` block, first in their assistant message (thought parts
    without a signature, or whose signature is not UTF-8, cannot be sent back and are left out).
    ``seed`` is not supported by Anthropic and is left out.

    ``tool_config.function_calling_config`` → ``tool_choice`` (sent only with tools): ``AUTO`` →
    ``{"type": "auto"}``, ``NONE`` → ``{"type": "none"}``, ``ANY`` → ``{"type": "any"}``, or
    with exactly one allowed name ``{"type": "tool", "name"}``; several allowed names (and allowed
    names with ``AUTO`` or no mode) restrict the ``tools`` sent to those functions.
    ``parallel_tool_calls=False`` adds ``"disable_parallel_tool_use": true`` (with no mode set,
    to an ``auto`` choice). ``VALIDATED`` raises :class:`~rxllm.ConfigurationError`.
    ``Tool(anthropic_server_tool=...)`` becomes the server tool's object (``type``, ``name``, its
    settings); any other provider's built-in tool is refused. ``safety_settings``: relaxing ones
    are a no-op, blocking thresholds are refused.

    >>> from rxllm import LlmRequest, Content, Part
    >>> mapper = AnthropicRequestMapper(api_key="sk-ant-secret")
    >>> req = mapper.to_http_request(LlmRequest(contents=[Content(role="user", parts=[Part.from_text("Hi")])]),
    ...                              model="claude-sonnet-4-5", stream=True)
    >>> req.url, "secret" in repr(req) or "secret" in repr(mapper)
    ('https://api.anthropic.com/v1/messages', False)
    """

    __slots__ = ("_kept", "_max_tokens", "_version")

    def __init__(
        self,
        *,
        base_url: str = ANTHROPIC_BASE_URL,
        api_key: str | None = None,
        max_tokens: int = 4096,
        anthropic_version: str = ANTHROPIC_VERSION,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be a positive integer, got {max_tokens!r}", provider=PROVIDER)
        super().__init__(
            provider=PROVIDER,
            base_url=base_url.rstrip("/"),
            api_key=api_key,
            extra_headers=extra_headers,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        self._max_tokens = max_tokens
        self._version = anthropic_version
        self._kept = KeptByConfig()  # the JSON of each config's members (see _config_wire)

    def _repr_settings(self) -> dict[str, object]:
        return {"max_tokens": self._max_tokens, "anthropic_version": self._version}

    def to_http_request(self, llm_request: LlmRequest, *, model: str, stream: bool) -> HttpRequest:
        """The HTTP request for ``model``.

        Raises:
            ConfigurationError: for a request Anthropic cannot express (more than one candidate, a
                response schema, an unsupported blob type, a thinking budget not below an explicit
                ``max_output_tokens``, a function response matching no call).
        """
        provider_headers = {"anthropic-version": self._version}
        if self._api_key:
            provider_headers["x-api-key"] = self._api_key
        config = llm_request.config
        http_options = config.http_options
        if config.model_fields_set and not self._merges_extra_body(http_options):
            text = self._spliced_json(llm_request, model, stream)
            if text is not None:  # the text of the body dict, the config's members kept (_config_wire)
                return self._post_json(self._endpoint("/v1/messages"), text, stream=stream,
                                       provider_headers=provider_headers, http_options=http_options)
        return self._post(
            self._endpoint("/v1/messages"),
            self._body(llm_request, model=model, stream=stream),
            stream=stream,
            provider_headers=provider_headers,
            http_options=http_options,
        )

    def _spliced_json(self, llm_request: LlmRequest, model: str, stream: bool) -> str | None:
        """``body_json(self._body(...))`` from the config's kept JSON and the request's messages;
        ``None`` when the config has no kept form or anything fails (then :meth:`_body` runs and
        raises what it raises, in its order)."""
        wire = self._kept.get(llm_request.config, self._config_wire)
        if wire is None:
            return None
        max_tokens, tail = wire
        try:
            system = system_text(llm_request)
            messages = body_json(self._messages(llm_request.contents))
            tail_text = render_kept(tail)
        except (ConfigurationError, TypeError, ValueError, RecursionError):
            return None
        system_member = f',"system":{body_json(system)}' if system else ""
        return (f'{{"model":{body_json(model)},"max_tokens":{max_tokens}{system_member},"messages":{messages}'
                f'{tail_text}{_STREAM_MEMBER if stream else ""}}}')

    def _config_wire(self, config: GenerateContentConfig) -> tuple[str, KeptJson] | None:
        """What :meth:`_body` takes from ``config`` alone, as JSON: ``max_tokens``, and the members
        after ``messages`` (tools, tool choice, options, thinking), each declaration's
        ``parameters`` encoded per request (:func:`~rxllm.providers._wire.kept_json`); kept per
        config object (:class:`~rxllm.providers._wire.KeptByConfig`). ``None`` for a config
        :meth:`_body` refuses, or one with a ``response_schema`` or a server tool (their JSON is
        built per request)."""
        if config.response_schema is not None or built_in_tools(config):
            return None
        try:  # _body's steps for the config, in its order
            if config.candidate_count is not None and config.candidate_count > 1:
                return None
            max_tokens = self._max_tokens_for(config)
            check_gemini_only_options(config, api=_API, provider=PROVIDER)
            choice = tool_choice(config, provider=PROVIDER)
            wire_choice = _tool_choice(choice)
            members: dict[str, object] = {}
            tools = [_tool(d, slot=True) for d in choice.declarations(api_takes_names=False)]
            if tools:
                members["tools"] = tools
                if wire_choice is not None:
                    members["tool_choice"] = wire_choice
            members.update(wire_config(config, _CONFIG_FIELDS))
            budget = _thinking_budget(config)
            if budget:
                members["thinking"] = {"type": "enabled", "budget_tokens": budget}
            return body_json(max_tokens), kept_members(members)
        except (ConfigurationError, TypeError, ValueError, RecursionError):
            return None

    # -- body -----------------------------------------------------------------------------

    def _body(self, llm_request: LlmRequest, *, model: str, stream: bool) -> dict[str, object]:
        config = llm_request.config
        if config.candidate_count is not None and config.candidate_count > 1:
            raise ConfigurationError("Anthropic returns one candidate per request", provider=PROVIDER)
        body: dict[str, object] = {"model": model, "max_tokens": self._max_tokens_for(config)}
        system = system_text(llm_request)
        if system:
            body["system"] = system
        body["messages"] = self._messages(llm_request.contents)
        check_gemini_only_options(config, api=_API, provider=PROVIDER)
        choice = tool_choice(config, provider=PROVIDER)
        wire_choice = _tool_choice(choice)
        tools = [_tool(d) for d in choice.declarations(api_takes_names=False)]
        tools.extend(_server_tool(field, settings) for field, settings in built_in_tools(config))
        if tools:
            body["tools"] = tools
            if wire_choice is not None:
                body["tool_choice"] = wire_choice
        body.update(wire_config(config, _CONFIG_FIELDS))
        if config.response_schema is not None:  # native structured output: the reply is JSON text
            schema = output_schema(config.response_schema).strict_schema()
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        budget = _thinking_budget(config)
        if budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if stream:
            body["stream"] = True
        return body

    def _max_tokens_for(self, config: GenerateContentConfig) -> int:
        budget = _thinking_budget(config)
        if config.max_output_tokens is not None:
            if budget and budget >= config.max_output_tokens:
                raise ConfigurationError(
                    f"the thinking budget ({budget}) must be below max_output_tokens ({config.max_output_tokens})",
                    provider=PROVIDER,
                )
            return config.max_output_tokens
        if budget and budget >= self._max_tokens:
            return budget + self._max_tokens
        return self._max_tokens

    def _messages(self, contents: Sequence[Content]) -> list[dict[str, object]]:
        ids = CallIdPairing("toolu_rxllm_{}", provider=PROVIDER)
        messages: list[_Message] = []
        for content in contents:
            if content.role == "system":
                continue
            role = _ROLES.get(content.role or "user")
            if role is None:
                raise ConfigurationError(
                    f"content role {content.role!r} has no Anthropic equivalent", provider=PROVIDER
                )
            message = _Message(role)
            for part in content.parts:
                _add_part(message, part, ids)
            if not message.first and not message.rest:
                continue
            if messages and messages[-1].role == role:  # strictly alternating: merge same-role turns
                messages[-1].first.extend(message.first)
                messages[-1].rest.extend(message.rest)
            else:
                messages.append(message)
        return [m.to_json() for m in messages]


_STREAM_MEMBER = ',"stream":true'


def _tool(declaration: FunctionDeclaration, *, slot: bool = False) -> dict[str, object]:
    tool: dict[str, object] = {"name": declaration.name}
    if declaration.description:
        tool["description"] = declaration.description
    schema = declaration.parameters
    if schema is None:
        tool["input_schema"] = {"type": "object", "properties": {}}
    else:
        tool["input_schema"] = ParametersSlot(declaration) if slot else schema
    return tool


def _tool_choice(choice: ToolChoice) -> dict[str, object] | None:
    mode = choice.mode
    wire: dict[str, object]
    if mode is FunctionCallingConfigMode.NONE:
        return {"type": "none"}
    if mode is None:
        if choice.parallel is not False:
            return None
        wire = {"type": "auto"}
    elif mode is FunctionCallingConfigMode.AUTO:
        wire = {"type": "auto"}
    elif mode is FunctionCallingConfigMode.ANY:
        forced = choice.forced_name
        wire = {"type": "tool", "name": forced} if forced is not None else {"type": "any"}
    else:
        raise ConfigurationError(
            f"function calling mode {mode!s} has no Anthropic equivalent (only Gemini constrains calls to the "
            "declared schemas); use ANY or AUTO",
            provider=PROVIDER,
        )
    if choice.parallel is False:
        wire["disable_parallel_tool_use"] = True
    return wire


def _server_tool(field: str, settings: object) -> dict[str, object]:
    if not isinstance(settings, AnthropicServerTool):
        raise refuse_built_in(field, api=_API, provider=PROVIDER)
    tool: dict[str, object] = {"type": settings.type, "name": settings.name}
    if settings.max_uses is not None:
        tool["max_uses"] = settings.max_uses
    for key in ("allowed_domains", "blocked_domains"):
        domains = getattr(settings, key)
        if domains is not None:
            tool[key] = list(domains)
    if settings.user_location is not None:
        tool["user_location"] = dict(settings.user_location)
    for key, value in (settings.settings or {}).items():
        tool.setdefault(key, value)
    return tool


def _thinking_budget(config: GenerateContentConfig) -> int | None:
    thinking = config.thinking_config
    if thinking is None or thinking.thinking_budget is None or thinking.thinking_budget == 0:
        return None
    if thinking.thinking_budget < 0:
        raise ConfigurationError(
            "Anthropic needs an explicit thinking budget (a dynamic budget, -1, has no equivalent)",
            provider=PROVIDER,
        )
    return thinking.thinking_budget


def _add_part(message: _Message, part: Part, ids: CallIdPairing) -> None:
    if part.function_response is not None:
        response = part.function_response
        message.first.append(
            {
                "type": "tool_result",
                "tool_use_id": ids.for_response(response.name, response.id),
                "content": json_text(response.response),
            }
        )
    elif part.function_call is not None:
        call = part.function_call
        message.rest.append(
            {"type": "tool_use", "id": ids.for_call(call.name, call.id), "name": call.name, "input": call.args}
        )
    elif part.thought:
        block = _thinking_block(part)
        if block is not None:
            message.first.append(block)
    elif part.inline_data is not None:
        message.rest.append(_blob_block(part.inline_data.mime_type, part.inline_data.data))
    elif part.text:
        message.rest.append({"type": "text", "text": part.text})


def _thinking_block(part: Part) -> dict[str, object] | None:
    if part.thought_signature is None:
        return None  # Anthropic rejects unsigned thinking
    try:
        signature = part.thought_signature.decode("utf-8")
    except UnicodeDecodeError:
        return None  # not an Anthropic signature (another provider's bytes)
    if part.text:
        return {"type": "thinking", "thinking": part.text, "signature": signature}
    return {"type": "redacted_thinking", "data": signature}


def _blob_block(mime_type: str, data: bytes) -> dict[str, object]:
    encoded = base64.b64encode(data).decode("ascii")
    source = {"type": "base64", "media_type": mime_type, "data": encoded}
    if mime_type.startswith("image/"):
        return {"type": "image", "source": source}
    if mime_type == "application/pdf":
        return {"type": "document", "source": source}
    raise ConfigurationError(f"inline data of type {mime_type!r} cannot be sent to Anthropic", provider=PROVIDER)
