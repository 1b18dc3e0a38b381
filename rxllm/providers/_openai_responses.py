"""OpenAI Responses API: the stream parser and the request mapper (pure, no I/O).

Stream events (``POST /v1/responses`` with ``stream: true``) and what each becomes:

- ``response.output_text.delta`` → ``text_delta``; ``response.refusal.delta`` → ``refusal_delta``;
  ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` → ``thought_delta``.
- ``response.output_item.added`` with a ``function_call`` item → a :class:`~rxllm.ToolCallFragment`
  (``index`` = ``output_index``, ``id`` = ``call_id``, ``name``);
  ``response.function_call_arguments.delta`` → an argument fragment.
- ``response.function_call_arguments.done`` and ``response.output_item.done`` (function call) → a
  ``complete=True`` fragment that carries the arguments only when no delta did (never twice).
- ``response.completed`` / ``response.incomplete`` → finish reason (raw: ``response.status``), usage,
  model, ``response.id`` (→ ``response_id``) and ``end_of_stream``; ``response.failed`` and
  ``error`` → an :class:`~rxllm.InBandError` and ``end_of_stream``.
- ``response.created``, ``response.in_progress`` and any other event → nothing.

Finish reasons: ``completed`` → STOP; ``incomplete`` → MAX_TOKENS for ``max_output_tokens``,
SAFETY for ``content_filter``, OTHER otherwise; ``failed`` / ``cancelled`` / anything else → OTHER.

Usage: ``prompt_token_count = input_tokens``, ``candidates_token_count = output_tokens`` (OpenAI
counts reasoning tokens in it), ``total_token_count = total_tokens``, ``thoughts_token_count =
output_tokens_details.reasoning_tokens``, ``cached_content_token_count =
input_tokens_details.cached_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, JsonValue

from .._core.errors import ConfigurationError, ProtocolError
from .._core.schema import output_schema
from .._core.types import (
    Content,
    FinishReason,
    FunctionDeclaration,
    GenerateContentConfig,
    LlmRequest,
    OpenAiFileSearch,
    OpenAiWebSearch,
    Part,
    UsageMetadata,
)
from .._models.chunk import Chunk, InBandError, ToolCallFragment
from .._models.sse import SseEvent
from .._transports.base import HttpRequest
from ._openai_chat import add_openai_tools, openai_tool_choice
from ._wire import (
    CallIdPairing,
    ConfigField,
    JsonRequestMapper,
    WireReader,
    built_in_tools,
    check_gemini_only_options,
    data_url,
    in_band_error,
    json_text,
    refuse_built_in,
    system_text,
    tool_choice,
    wire_config,
)

__all__ = [
    "OPENAI_BASE_URL",
    "OpenAiResponsesChunkParser",
    "OpenAiResponsesRequestMapper",
    "map_responses_status",
    "map_responses_usage",
]

PROVIDER = "openai"
_API = "the OpenAI Responses API"
OPENAI_BASE_URL = "https://api.openai.com/v1"

_wire = WireReader(PROVIDER)

_INCOMPLETE_REASONS = {"max_output_tokens": FinishReason.MAX_TOKENS, "content_filter": FinishReason.SAFETY}
_RETRYABLE_CODES = frozenset(
    {"server_error", "internal_error", "rate_limit_exceeded", "rate_limit_error", "overloaded", "timeout"}
)
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_THOUGHT_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})


def map_responses_status(status: str, incomplete_reason: str | None = None) -> FinishReason:
    """The :class:`~rxllm.FinishReason` for a response's ``status`` (and ``incomplete_details.reason``).

    >>> map_responses_status("completed"), map_responses_status("incomplete", "max_output_tokens")
    (<FinishReason.STOP: 'STOP'>, <FinishReason.MAX_TOKENS: 'MAX_TOKENS'>)
    """
    if status == "completed":
        return FinishReason.STOP
    if status == "incomplete" and incomplete_reason is not None:
        return _INCOMPLETE_REASONS.get(incomplete_reason, FinishReason.OTHER)
    return FinishReason.OTHER


def map_responses_usage(usage: Mapping[str, object]) -> UsageMetadata | None:
    """A raw Responses ``usage`` object as :class:`~rxllm.UsageMetadata` (see the module docstring).

    Returns ``None`` when it holds no token count at all.

    Raises:
        ProtocolError: when a count is not a non-negative integer, or a details member not an object.

    >>> u = map_responses_usage({"input_tokens": 58, "output_tokens": 23, "total_tokens": 81,
    ...                          "output_tokens_details": {"reasoning_tokens": 10}})
    >>> u.prompt_token_count, u.candidates_token_count, u.total_token_count, u.thoughts_token_count
    (58, 23, 81, 10)
    """
    input_details = _wire.usage_object_at(usage, "input_tokens_details", "usage") or {}
    output_details = _wire.usage_object_at(usage, "output_tokens_details", "usage") or {}
    metadata = UsageMetadata(
        prompt_token_count=_wire.count_at(usage, "input_tokens", "usage"),
        candidates_token_count=_wire.count_at(usage, "output_tokens", "usage"),
        total_token_count=_wire.count_at(usage, "total_tokens", "usage"),
        thoughts_token_count=_wire.count_at(output_details, "reasoning_tokens", "usage.output_tokens_details"),
        cached_content_token_count=_wire.count_at(input_details, "cached_tokens", "usage.input_tokens_details"),
    )
    return metadata if metadata != UsageMetadata() else None


def _in_band_error(error: object) -> InBandError:
    """An error object (its ``code``, else its ``type``, is the code)."""
    return in_band_error(error, code_keys=("code", "type"), retryable_codes=_RETRYABLE_CODES)


def _terminal_chunk(response: Mapping[str, object], where: str) -> Chunk:
    """The chunk for a finished response object (``response.completed`` / ``incomplete`` / ``failed``)."""
    status = _wire.string_at(response, "status", where)
    details = _wire.optional_object_at(response, "incomplete_details", where)
    reason = _wire.optional_string_at(details, "reason", f"{where}.incomplete_details") if details is not None else None
    usage = _wire.usage_object_at(response, "usage", where)
    error: InBandError | None = None
    if status == "failed":
        error = _in_band_error(_wire.optional_object_at(response, "error", where))
    return Chunk(
        finish_reason=map_responses_status(status, reason),
        raw_finish_reason=status,
        usage=map_responses_usage(usage) if usage is not None else None,
        model_version=_wire.optional_string_at(response, "model", where),
        response_id=_wire.optional_string_at(response, "id", where),
        error=error,
        end_of_stream=True,
    )


# --------------------------------------------------------------------------------------------
# the parser


class OpenAiResponsesChunkParser:
    """Turns OpenAI Responses stream events into :class:`~rxllm.Chunk` (one parser per stream).

    Per-stream state: the output indexes that are function calls (an argument delta for any other
    index is a :class:`~rxllm.ProtocolError`) and those whose arguments already arrived, so the
    ``.done`` events that repeat the whole arguments never add them twice.

    >>> from rxllm import SseEvent
    >>> p = OpenAiResponsesChunkParser()
    >>> p.parse(SseEvent("response.output_text.delta",
    ...     '{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Paris"}')).text_delta
    'Paris'
    """

    __slots__ = ("_calls", "_calls_with_arguments")

    def __init__(self) -> None:
        self._calls: set[int] = set()
        self._calls_with_arguments: set[int] = set()

    def parse(self, event: SseEvent) -> Chunk | None:
        """The chunk for one stream event, or ``None`` for events that carry nothing.

        Raises:
            ProtocolError: for bad JSON, a wrong shape, or arguments for an output that is no call.
        """
        if event.data == "[DONE]":
            return Chunk(end_of_stream=True)
        name = event.event
        payload = _wire.decode_object(event.data, f"{name} event")
        kind = payload.get("type")
        if not isinstance(kind, str):
            kind = name
        if kind == "response.output_text.delta":
            text = _wire.string_at(payload, "delta", kind)
            return Chunk(text_delta=text) if text else None
        if kind == "response.function_call_arguments.delta":
            return self._arguments(payload, kind, _wire.string_at(payload, "delta", kind), complete=False)
        if kind in _THOUGHT_DELTAS:
            thought = _wire.string_at(payload, "delta", kind)
            return Chunk(thought_delta=thought) if thought else None
        if kind == "response.refusal.delta":
            refusal = _wire.string_at(payload, "delta", kind)
            return Chunk(refusal_delta=refusal) if refusal else None
        if kind == "response.output_item.added" or kind == "response.output_item.done":
            return self._item(payload, kind, complete=kind.endswith(".done"))
        if kind == "response.function_call_arguments.done":
            return self._arguments(payload, kind, _wire.string_at(payload, "arguments", kind), complete=True)
        if kind in _TERMINAL:
            return _terminal_chunk(_wire.object_at(payload, "response", kind), f"{kind}.response")
        if kind == "error" or name == "error":
            nested = payload.get("error")
            return Chunk(error=_in_band_error(nested if isinstance(nested, dict) else payload), end_of_stream=True)
        return None  # response.created / in_progress, content_part.*, *.done repeats, newer events

    def parse_response(self, body: bytes) -> Sequence[Chunk]:
        """The chunks of a non-streamed response object (or of an ``{"error": ...}`` body).

        Raises:
            ProtocolError: for bad JSON or a wrong shape.
        """
        response = _wire.decode_object(body, "response body")
        if "output" not in response and isinstance(response.get("error"), dict):
            return [
                Chunk(error=_in_band_error(_wire.object_at(response, "error", "response body")), end_of_stream=True)
            ]
        chunks: list[Chunk] = []
        for index, item in enumerate(_wire.list_at(response, "output", "response body")):
            where = f"output[{index}]"
            if not isinstance(item, dict):
                raise _wire.wrong(f"response body.{where}", "an object", item)
            kind = _wire.optional_string_at(item, "type", where)
            if kind == "message":
                for part in _wire.list_at(item, "content", where):
                    if not isinstance(part, dict):
                        raise _wire.wrong(f"{where}.content[]", "an object", part)
                    part_kind = _wire.optional_string_at(part, "type", f"{where}.content[]")
                    if part_kind == "output_text":
                        chunks.append(Chunk(text_delta=_wire.string_at(part, "text", f"{where}.content[]")))
                    elif part_kind == "refusal":
                        chunks.append(Chunk(refusal_delta=_wire.string_at(part, "refusal", f"{where}.content[]")))
            elif kind == "reasoning":
                for key in ("summary", "content"):
                    for piece in _wire.list_at(item, key, where):
                        if isinstance(piece, dict) and isinstance(piece.get("text"), str):
                            chunks.append(Chunk(thought_delta=_wire.string_at(piece, "text", f"{where}.{key}[]")))
            elif kind == "function_call":
                fragment = ToolCallFragment(
                    index,
                    id=_wire.string_at(item, "call_id", where),
                    name=_wire.string_at(item, "name", where),
                    arguments_delta=_wire.string_at(item, "arguments", where),
                    complete=True,
                )
                chunks.append(Chunk(tool_call_fragments=(fragment,)))
        chunks.append(_terminal_chunk(response, "response body"))
        return chunks

    # -- events ---------------------------------------------------------------------------

    def _item(self, payload: dict[str, object], kind: str, *, complete: bool) -> Chunk | None:
        item = _wire.object_at(payload, "item", kind)
        if item.get("type") != "function_call":
            return None
        index = _wire.index_at(payload, "output_index", kind)
        where = f"{kind}.item"
        self._calls.add(index)
        arguments = _wire.optional_string_at(item, "arguments", where) or ""
        if arguments and index not in self._calls_with_arguments:
            self._calls_with_arguments.add(index)
        else:
            arguments = ""
        fragment = ToolCallFragment(
            index,
            id=_wire.optional_string_at(item, "call_id", where),
            name=_wire.optional_string_at(item, "name", where),
            arguments_delta=arguments,
            complete=complete,
        )
        return Chunk(tool_call_fragments=(fragment,))

    def _arguments(self, payload: dict[str, object], kind: str, arguments: str, *, complete: bool) -> Chunk | None:
        index = _wire.index_at(payload, "output_index", kind)
        if index not in self._calls:
            raise ProtocolError(f"{kind}: output {index} is not a function call", provider=PROVIDER)
        if complete:
            if index in self._calls_with_arguments:
                arguments = ""
            name = _wire.optional_string_at(payload, "name", kind)
        else:
            name = None
            if not arguments:
                return None
        if arguments:
            self._calls_with_arguments.add(index)
        return Chunk(
            tool_call_fragments=(ToolCallFragment(index, name=name, arguments_delta=arguments, complete=complete),)
        )


# --------------------------------------------------------------------------------------------
# the request mapper


_CONFIG_FIELDS: tuple[tuple[ConfigField, str], ...] = (
    ("max_output_tokens", "max_output_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
)
_ASSISTANT_ROLES = frozenset({"model", "assistant"})
_USER_ROLES = frozenset({"user", "tool", "function"})


class OpenAiResponsesRequestMapper(JsonRequestMapper):
    """Builds ``POST {base_url}/responses`` requests from an :class:`~rxllm.LlmRequest`.

    Args:
        base_url: the API root, ``/v1`` included.
        api_key: sent as ``Authorization: Bearer``; ``None`` sends none. Never shown in a repr,
            log or error.
        extra_headers: more headers (``OpenAI-Organization``...), sent as given; each replaces a
            default header of the same name, in any letter case.
        extra_body: more body members for every request, merged as :class:`JsonRequestMapper` says
            (the request's ``http_options.extra_body`` is merged over it).
        extra_body_overrides: whether ``extra_body`` values replace rxllm's own.

    Mapping: the system instruction (and ``system``-role content) becomes ``instructions``; user
    text and images become a user message of ``input_text`` / ``input_image`` parts; model text an
    assistant message; function calls ``function_call`` items and function responses
    ``function_call_output`` items (the response object as JSON text), in conversation order.
    Thought parts are not sent (a reasoning item cannot be rebuilt from them). Tools are sent with
    ``"strict": false`` (the Responses API defaults to strict schemas, which most hand-written
    schemas do not satisfy). ``include_thoughts`` asks for reasoning summaries; ``top_k``, ``seed``
    and thinking budgets have no Responses equivalent and are left out.

    Built-in tools: ``Tool(openai_web_search=...)`` → ``{"type": "web_search", ...}`` (allowed
    domains in ``filters``), ``Tool(openai_file_search=...)`` → ``{"type": "file_search",
    "vector_store_ids", ...}``; any other provider's built-in tool raises
    :class:`~rxllm.ConfigurationError`. ``tool_config`` maps as for Chat Completions (see
    :class:`~rxllm.providers.openai.OpenAiChatRequestMapper`), the named choice being
    ``{"type": "function", "name"}``; ``safety_settings`` too.

    >>> from rxllm import LlmRequest, Content, Part
    >>> mapper = OpenAiResponsesRequestMapper(api_key="sk-secret")
    >>> req = mapper.to_http_request(LlmRequest(contents=[Content(role="user", parts=[Part.from_text("Hi")])]),
    ...                              model="gpt-4o", stream=True)
    >>> req.url, "secret" in repr(req) or "secret" in repr(mapper)
    ('https://api.openai.com/v1/responses', False)
    """

    __slots__ = ()

    def __init__(
        self,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
    ) -> None:
        super().__init__(
            provider=PROVIDER,
            base_url=base_url.rstrip("/"),
            api_key=api_key,
            extra_headers=extra_headers,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )

    def to_http_request(self, llm_request: LlmRequest, *, model: str, stream: bool) -> HttpRequest:
        """The HTTP request for ``model``.

        Raises:
            ConfigurationError: for a request the Responses API cannot express (stop sequences,
                more than one candidate, an unsupported blob type, a function response matching no call).
        """
        return self._post(
            self._endpoint("/responses"),
            self._body(llm_request, model=model, stream=stream),
            stream=stream,
            provider_headers={"authorization": f"Bearer {self._api_key}"} if self._api_key else {},
            http_options=llm_request.config.http_options,
        )

    def _body(self, llm_request: LlmRequest, *, model: str, stream: bool) -> dict[str, object]:
        config = llm_request.config
        if config.candidate_count is not None and config.candidate_count > 1:
            raise ConfigurationError("the Responses API returns one candidate per request", provider=PROVIDER)
        if config.stop_sequences:
            raise ConfigurationError("the Responses API does not support stop sequences", provider=PROVIDER)
        check_gemini_only_options(config, api=_API, provider=PROVIDER)
        choice = tool_choice(config, provider=PROVIDER)
        wire_choice = openai_tool_choice(choice, api=_API, named=lambda name: {"type": "function", "name": name})
        body: dict[str, object] = {"model": model}
        instructions = system_text(llm_request)
        if instructions:
            body["instructions"] = instructions
        body["input"] = _input_items(llm_request.contents)
        tools = [_tool(d) for d in choice.declarations(api_takes_names=False)]
        tools.extend(_built_in_tool(field, settings) for field, settings in built_in_tools(config))
        add_openai_tools(body, tools, choice, wire_choice)
        body.update(wire_config(config, _CONFIG_FIELDS))
        text_format = _text_format(config)
        if text_format is not None:
            body["text"] = {"format": text_format}
        if config.thinking_config is not None and config.thinking_config.include_thoughts:
            body["reasoning"] = {"summary": "auto"}
        if stream:
            body["stream"] = True
        return body


def _tool(declaration: FunctionDeclaration) -> dict[str, object]:
    tool: dict[str, object] = {"type": "function", "name": declaration.name}
    if declaration.description:
        tool["description"] = declaration.description
    schema = declaration.parameters
    tool["parameters"] = schema if schema is not None else {"type": "object", "properties": {}}
    tool["strict"] = False
    return tool


def _built_in_tool(field: str, settings: BaseModel) -> dict[str, object]:
    if isinstance(settings, OpenAiWebSearch):
        tool: dict[str, object] = {"type": "web_search"}
        if settings.search_context_size is not None:
            tool["search_context_size"] = settings.search_context_size
        if settings.allowed_domains is not None:
            tool["filters"] = {"allowed_domains": list(settings.allowed_domains)}
        if settings.user_location is not None:
            tool["user_location"] = dict(settings.user_location)
        return tool
    if isinstance(settings, OpenAiFileSearch):
        tool = {"type": "file_search", "vector_store_ids": list(settings.vector_store_ids)}
        if settings.max_num_results is not None:
            tool["max_num_results"] = settings.max_num_results
        if settings.filters is not None:
            tool["filters"] = dict(settings.filters)
        if settings.ranking_options is not None:
            tool["ranking_options"] = dict(settings.ranking_options)
        return tool
    raise refuse_built_in(field, api=_API, provider=PROVIDER)


def _text_format(config: GenerateContentConfig) -> dict[str, object] | None:
    if config.response_schema is not None:
        schema = output_schema(config.response_schema)
        return {"type": "json_schema", "name": schema.name, "schema": schema.strict_schema(), "strict": True}
    if config.response_mime_type == "application/json":
        return {"type": "json_object"}
    return None


def _input_items(contents: Sequence[Content]) -> list[dict[str, object]]:
    ids = CallIdPairing("call_rxllm_{}", provider=PROVIDER)
    items: list[dict[str, object]] = []
    for content in contents:
        role = content.role or "user"
        if role == "system":
            continue
        if role not in _ASSISTANT_ROLES and role not in _USER_ROLES:
            raise ConfigurationError(f"content role {role!r} has no Responses API equivalent", provider=PROVIDER)
        assistant = role in _ASSISTANT_ROLES
        message: list[dict[str, object]] = []  # message parts not yet flushed into a message item
        for part in content.parts:
            if part.function_call is not None or part.function_response is not None:
                _flush(items, message, assistant=assistant)
                items.append(_call_item(part, ids))
            elif part.thought:
                continue
            elif part.inline_data is not None:
                mime_type = part.inline_data.mime_type
                if assistant or not mime_type.startswith("image/"):
                    raise ConfigurationError(
                        f"inline data of type {mime_type!r} cannot be sent as {role} input", provider=PROVIDER
                    )
                message.append({"type": "input_image", "image_url": data_url(mime_type, part.inline_data.data)})
            elif part.text:
                message.append({"type": "input_text", "text": part.text})
        _flush(items, message, assistant=assistant)
    return items


def _call_item(part: Part, ids: CallIdPairing) -> dict[str, object]:
    call, response = part.function_call, part.function_response
    if call is not None:
        return {
            "type": "function_call",
            "call_id": ids.for_call(call.name, call.id),
            "name": call.name,
            "arguments": json_text(call.args),
        }
    if response is None:
        raise ConfigurationError("a part with neither a function call nor a response", provider=PROVIDER)
    return {
        "type": "function_call_output",
        "call_id": ids.for_response(response.name, response.id),
        "output": json_text(response.response),
    }


def _flush(items: list[dict[str, object]], message: list[dict[str, object]], *, assistant: bool) -> None:
    if not message:
        return
    if assistant:  # model text goes back as one assistant message
        items.append({"role": "assistant", "content": "".join(str(p["text"]) for p in message)})
    else:
        items.append({"role": "user", "content": list(message)})
    message.clear()
