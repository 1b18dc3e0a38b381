"""OpenAI Chat Completions (and every server that speaks it): the chunk parser and the request mapper.

Both classes are pure: no I/O, no Rx. :class:`OpenAiChatChunkParser` turns one SSE event of a
``/chat/completions`` stream (or a whole non-streamed ``chat.completion`` body) into normalized
:class:`~rxllm.Chunk` s; :class:`OpenAiChatRequestMapper` turns an :class:`~rxllm.LlmRequest` into
the HTTP request. They cover api.openai.com and the Chat-Completions-shaped APIs of DeepSeek, Z.ai,
Groq, OpenRouter, Mistral, Ollama, llama.cpp and vLLM.

What the parser reads (everything else, e.g. ``obfuscation``, ``logprobs``, ``moderation``,
``x_groq``, ``reasoning_details``, ``native_finish_reason``, is ignored):

* ``data: [DONE]`` ends the stream (``Chunk(end_of_stream=True)``).
* Choice 0 only. With ``n > 1`` the choice with ``index`` 0 is the answer and the other choices
  are ignored (a choice without ``index`` counts as index 0). ``delta`` of that choice:

  - ``content``: a string, or an array of typed parts (Mistral): ``{"type": "text", "text"}`` is
    answer text, ``{"type": "thinking", "thinking": [{"type": "text", "text"}]}`` is thought text,
    other part types are ignored.
  - ``reasoning_content`` (DeepSeek, Z.ai, vLLM) or else ``reasoning`` (Groq, OpenRouter, Ollama):
    thought text. Servers that send both carry the same text in both, so only one is read.
  - ``refusal``: refusal text; ``tool_calls[]``: fragments keyed by ``index`` (list position when a
    server omits it), with ``id``, ``function.name`` and ``function.arguments``.
  - ``finish_reason``: ``stop``, ``tool_calls`` and ``function_call`` map to STOP, ``length`` to
    MAX_TOKENS, ``content_filter`` to SAFETY, anything else to OTHER; the raw value is kept.

* ``usage`` in any chunk (also ``choices: []`` chunks, and chunks after them); ``"usage": null``
  means none. ``model`` becomes ``model_version``, ``id`` becomes ``response_id``.
* An ``error`` object in a data chunk (OpenRouter) becomes an :class:`~rxllm.InBandError`; an SSE
  event of type ``error`` (Groq) too, and also ends the stream, since nothing follows it. Other
  event types (``ping``) carry nothing. ``retryable`` is true when the error's HTTP-like status
  (``code``/``status``/``status_code``) is 408, 409, 429 or 5xx, or its ``type``/``code`` names a
  server, overload, rate-limit, timeout or unavailability condition; anything else (invalid
  request, tool validation, token limit, content policy) is not retryable: the same request would
  fail the same way.

Data that is not JSON, or JSON of the wrong shape, raises :class:`~rxllm.ProtocolError`.

>>> from rxllm import SseEvent
>>> parser = OpenAiChatChunkParser()
>>> chunk = parser.parse(SseEvent(data='{"model":"m","choices":[{"index":0,"delta":{"content":"Hi"}}]}'))
>>> chunk.text_delta, chunk.model_version
('Hi', 'm')
>>> parser.parse(SseEvent(data="[DONE]")).end_of_stream
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import JsonValue

from .._core.errors import ConfigurationError, ProtocolError
from .._core.genai_types import FunctionCallingConfigMode
from .._core.json_codec import loads
from .._core.schema import output_schema
from .._core.types import FinishReason, FunctionDeclaration, GenerateContentConfig, LlmRequest, Part, UsageMetadata
from .._models.chunk import Chunk, InBandError, ToolCallFragment
from .._models.sse import SseEvent
from .._transports.base import HttpRequest
from ._wire import (
    CallIdPairing,
    JsonRequestMapper,
    KeptByConfig,
    KeptJson,
    ParametersSlot,
    ToolChoice,
    WireReader,
    body_json,
    built_in_tools,
    check_gemini_only_options,
    data_url,
    json_text,
    kept_members,
    refuse_built_in,
    render_kept,
    tool_choice,
    wire_config,
)

__all__ = ["OpenAiChatChunkParser", "OpenAiChatRequestMapper", "add_openai_tools", "openai_tool_choice"]

_PROVIDER = "openai"
_API = "OpenAI Chat Completions"

_loads = loads  # the JSON decoder of error events (rxllm._core.json_codec)
_wire = WireReader(_PROVIDER)

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "length": FinishReason.MAX_TOKENS,
    "tool_calls": FinishReason.STOP,
    "function_call": FinishReason.STOP,
    "content_filter": FinishReason.SAFETY,
}

_tuple_new = tuple.__new__
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
_RETRYABLE_WORDS = ("server_error", "internal", "overload", "rate_limit", "timeout", "unavailable", "capacity")


# --------------------------------------------------------------------------------------------
# parser


def _usage(value: object) -> UsageMetadata | None:
    """The ``usage`` member; a bad figure (or a usage that is not an object) is dropped and
    logged, the answer kept (:meth:`WireReader.count_at`, the rule of every provider)."""
    usage = _wire.usage_object_at({"usage": value}, "usage", "chunk")
    if usage is None:
        return None
    return UsageMetadata(
        prompt_token_count=_wire.count_at(usage, "prompt_tokens", "usage"),
        candidates_token_count=_wire.count_at(usage, "completion_tokens", "usage"),
        total_token_count=_wire.count_at(usage, "total_tokens", "usage"),
        thoughts_token_count=_wire.count_at(usage.get("completion_tokens_details"), "reasoning_tokens",
                                            "usage.completion_tokens_details"),
        cached_content_token_count=_wire.count_at(usage.get("prompt_tokens_details"), "cached_tokens",
                                                  "usage.prompt_tokens_details"),
    )


def _in_band_error(value: object) -> InBandError:
    """An ``error`` member (an object, or a bare message string) as an :class:`InBandError`."""
    if isinstance(value, str):
        return InBandError(message=value, code=None, retryable=False)
    if not isinstance(value, dict):
        return InBandError(message=json_text(value), code=None, retryable=False)
    message = value.get("message")
    if not isinstance(message, str) or not message:
        message = "the provider reported an error without a message"
    raw_code, raw_type = value.get("code"), value.get("type")
    code: str | None
    if isinstance(raw_code, str) and raw_code:
        code = raw_code
    elif isinstance(raw_type, str) and raw_type:
        code = raw_type
    elif isinstance(raw_code, int) and not isinstance(raw_code, bool):
        code = str(raw_code)
    else:
        code = None
    return InBandError(message=message, code=code, retryable=_is_retryable(value))


def _is_retryable(error: Mapping[str, Any]) -> bool:
    for key in ("status_code", "status", "code"):
        status = error.get(key)
        if isinstance(status, int) and not isinstance(status, bool):
            return status in _RETRYABLE_STATUSES or status >= 500
    for key in ("type", "code"):
        word = error.get(key)
        if isinstance(word, str) and any(w in word.lower() for w in _RETRYABLE_WORDS):
            return True
    return False


def _content_parts(content: object, what: str) -> tuple[str, str]:
    """``(answer text, thought text)`` of a ``content`` value: a string, null or an array of parts."""
    if content is None:
        return "", ""
    if isinstance(content, str):
        return content, ""
    parts = _wire.expect(content, list, what)
    text: list[str] = []
    thought: list[str] = []
    for part in parts:
        part = _wire.expect(part, dict, f"{what}[]")
        kind = part.get("type")
        if kind == "text":
            piece = _wire.optional_string_at(part, "text", f"{what}[]")
            if piece:
                text.append(piece)
        elif kind == "thinking":
            thinking = part.get("thinking")
            if isinstance(thinking, str):
                thought.append(thinking)
            elif thinking is not None:
                for inner in _wire.expect(thinking, list, f"{what}[].thinking"):
                    inner = _wire.expect(inner, dict, f"{what}[].thinking[]")
                    if inner.get("type", "text") == "text":
                        piece = _wire.optional_string_at(inner, "text", f"{what}[].thinking[]")
                        if piece:
                            thought.append(piece)
    return "".join(text), "".join(thought)


def _thought(message: Mapping[str, Any], what: str) -> str:
    reasoning = _wire.optional_string_at(message, "reasoning_content", what)
    if not reasoning:
        reasoning = _wire.optional_string_at(message, "reasoning", what)
    return reasoning or ""


def _tool_call_fragments(value: object, what: str, *, complete: bool) -> tuple[ToolCallFragment, ...]:
    if value is None:
        return ()
    calls = _wire.expect(value, list, what)
    item, function_item = f"{what}[]", f"{what}[].function"  # where each call and its function are named
    fragments = []
    for position, call in enumerate(calls):
        call = _wire.expect(call, dict, item)
        index = call.get("index", position)
        _wire.expect(index, int, f"{item}.index")
        function = call.get("function")
        if function is None:
            function = {}
        _wire.expect(function, dict, function_item)
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a few servers send the arguments as an object
            arguments = json_text(arguments)
        elif arguments is not None and not isinstance(arguments, str):
            raise _wire.wrong(f"{function_item}.arguments", "a string", arguments)
        fragments.append(
            ToolCallFragment(
                index=index,
                id=_wire.optional_string_at(call, "id", item) or None,
                name=_wire.optional_string_at(function, "name", function_item) or None,
                arguments_delta=arguments or "",
                complete=complete,
            )
        )
    return tuple(fragments)


def _first_choice(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    choices = payload.get("choices")
    if choices is None:
        return None
    for choice in _wire.expect(choices, list, "choices"):
        _wire.expect(choice, dict, "choices[]")
        index = choice.get("index", 0)
        if index == 0 and not isinstance(index, bool):
            return choice  # type: ignore[no-any-return]
        if not isinstance(index, int) or isinstance(index, bool):
            raise _wire.wrong("choices[].index", "an integer", index)
    return None


def _finish(choice: Mapping[str, Any], what: str) -> tuple[FinishReason | None, str | None]:
    raw = _wire.optional_string_at(choice, "finish_reason", what)
    if raw is None:
        return None, None
    return _FINISH_REASONS.get(raw, FinishReason.OTHER), raw


class OpenAiChatChunkParser:
    """Parses Chat Completions stream events (and non-streamed bodies) into :class:`~rxllm.Chunk` s.

    Stateless, so one instance could serve many streams; the model still makes one per stream, as
    the :class:`~rxllm.ChunkParser` protocol says. The module docstring lists every field read.

    >>> from rxllm import SseEvent
    >>> chunk = OpenAiChatChunkParser().parse(SseEvent(data='{"choices":[],"usage":{"prompt_tokens":3}}'))
    >>> chunk.usage.prompt_token_count
    3
    """

    __slots__ = ()

    def parse(self, event: SseEvent) -> Chunk | None:
        """The chunk of one SSE event; ``None`` for event types other than ``message`` and ``error``.

        Raises:
            ProtocolError: for data that is not a JSON object of the Chat Completions chunk shape.
        """
        kind, data = event[0], event[1]
        if kind == "message":
            if data == "[DONE]" or (len(data) < 16 and data.strip() == "[DONE]"):
                return Chunk(end_of_stream=True)
            try:  # _wire.decode_object, inline: once per streamed event
                payload = loads(data)
            except (ValueError, TypeError):
                payload = None
            if type(payload) is not dict:
                payload = _wire.decode_object(data, "chunk")  # raises the ProtocolError
            # The hot path, checked inline: a plain text delta of the one choice. The unpacking and the
            # subscript stand for shape checks: they fail (and the general path decides) unless
            # ``choices`` holds exactly one item and that one and its ``delta`` are objects.
            try:
                (choice,) = payload["choices"]
                delta = choice["delta"]
                content = delta.get("content")
            except (KeyError, TypeError, ValueError, AttributeError):
                content = None  # (the general path is called outside the handler: no chained context)
            if type(content) is str:
                index = choice.get("index", 0)
                if (type(index) is int and index == 0 and choice.get("finish_reason") is None
                        and (len(delta) == 1 or (len(delta) == 2 and "role" in delta))  # no key but content, role
                        and payload.get("usage") is None and payload.get("error") is None):
                    m = payload.get("model")
                    r = payload.get("id")
                    # text_chunk(content or None, m, r) without its frame (tests/test_chunk_fast_paths.py)
                    return _tuple_new(Chunk, (content or None, None, (), None, None, None, None, None, None, None,
                                              None, m if type(m) is str else None, False,
                                              r if type(r) is str else None))
            return self._chunk(payload)
        if kind == "error":
            return Chunk(error=self._error_event(event.data), end_of_stream=True)
        return None

    def parse_response(self, body: bytes) -> Sequence[Chunk]:
        """The one chunk of a non-streamed ``chat.completion`` body (``choices[0].message``).

        The chunk carries the whole turn (text, thought, complete tool calls, finish reason,
        usage) and ``end_of_stream``. A body that is an ``{"error": ...}`` object yields an
        error chunk.

        Raises:
            ProtocolError: for a body that is not a JSON object of the ``chat.completion`` shape.
        """
        payload = _wire.decode_object(body, "chat.completion body")
        error = payload.get("error")
        usage = _usage(payload.get("usage"))
        model = payload.get("model")
        model_version = model if isinstance(model, str) else None
        response_id = payload.get("id")
        response_id = response_id if isinstance(response_id, str) else None
        choice = _first_choice(payload)
        if choice is None:
            if error is None and usage is None:
                raise ProtocolError("chat.completion body has no choice with index 0", provider=_PROVIDER)
            return [
                Chunk(
                    usage=usage,
                    model_version=model_version,
                    error=_in_band_error(error) if error is not None else None,
                    end_of_stream=True,
                    response_id=response_id,
                )
            ]
        message = choice.get("message")
        if message is None:
            message = {}
        _wire.expect(message, dict, "choices[].message")
        text, thought_in_content = _content_parts(message.get("content"), "choices[].message.content")
        thought = _thought(message, "choices[].message") + thought_in_content
        finish_reason, raw_finish = _finish(choice, "choices[]")
        refusal = _wire.optional_string_at(message, "refusal", "choices[].message")
        return [
            Chunk(
                text_delta=text or None,
                thought_delta=thought or None,
                tool_call_fragments=_tool_call_fragments(
                    message.get("tool_calls"), "choices[].message.tool_calls", complete=True
                ),
                finish_reason=finish_reason,
                usage=usage,
                raw_finish_reason=raw_finish,
                error=_in_band_error(error) if error is not None else None,
                refusal_delta=refusal or None,
                model_version=model_version,
                end_of_stream=True,
                response_id=response_id,
            )
        ]

    @staticmethod
    def _chunk(payload: dict[str, Any]) -> Chunk:
        # The general path: every event that is not a plain text delta of choice 0 (parse() takes
        # those inline). The common shapes are still checked inline: reasoning streams come here.
        model = payload.get("model")
        response_id = payload.get("id")
        error = payload.get("error")
        usage = payload.get("usage")
        choices = payload.get("choices")
        choice: dict[str, Any] | None = None
        if type(choices) is list and choices and type(choices[0]) is dict:
            index = choices[0].get("index", 0)
            if type(index) is int and index == 0:
                choice = choices[0]
        if choice is None:
            choice = _first_choice(payload)
        if choice is None:
            return Chunk(
                usage=_usage(usage) if usage is not None else None,
                error=_in_band_error(error) if error is not None else None,
                model_version=model if isinstance(model, str) else None,
                response_id=response_id if type(response_id) is str else None,
            )
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        elif type(delta) is not dict:
            raise _wire.wrong("choices[].delta", "an object", delta)
        content = delta.get("content")
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if thought is not None and type(thought) is not str:
            thought = _thought(delta, "delta")  # raises for the wrong type
        if content is not None and type(content) is not str:
            content, in_content = _content_parts(content, "delta.content")
            thought = (thought or "") + in_content
        refusal = delta.get("refusal")
        if refusal is not None and type(refusal) is not str:
            raise _wire.wrong("delta.refusal", "a string", refusal)
        tool_calls = delta.get("tool_calls")
        raw_finish = choice.get("finish_reason")
        finish_reason = None
        if raw_finish is not None:
            if type(raw_finish) is not str:
                raise _wire.wrong("choices[].finish_reason", "a string", raw_finish)
            finish_reason = _FINISH_REASONS.get(raw_finish, FinishReason.OTHER)
        return Chunk(
            text_delta=content or None,
            thought_delta=thought or None,
            tool_call_fragments=_tool_call_fragments(tool_calls, "delta.tool_calls", complete=False)
            if tool_calls is not None
            else (),
            finish_reason=finish_reason,
            usage=_usage(usage) if usage is not None else None,
            raw_finish_reason=raw_finish,
            error=_in_band_error(error) if error is not None else None,
            refusal_delta=refusal or None,
            model_version=model if type(model) is str else None,
            response_id=response_id if type(response_id) is str else None,
        )

    @staticmethod
    def _error_event(data: str) -> InBandError:
        try:
            payload = _loads(data)
        except (ValueError, TypeError):
            return InBandError(message=data.strip() or "the provider sent an error event", retryable=False)
        if isinstance(payload, dict) and payload.get("error") is not None:
            return _in_band_error(payload["error"])
        if isinstance(payload, dict) and payload.get("message") is not None:
            return _in_band_error(payload)
        return InBandError(message=data.strip() or "the provider sent an error event", retryable=False)


# --------------------------------------------------------------------------------------------
# request mapper


class OpenAiChatRequestMapper(JsonRequestMapper):
    """Maps an :class:`~rxllm.LlmRequest` to a ``POST {base_url}/chat/completions`` request.

    The body, from the request:

    * ``config.system_instruction`` → a first ``{"role": "system"}`` message (its text parts).
    * user turns → ``{"role": "user", "content": ...}``: a string for one text part, else an array
      of ``text`` and ``image_url`` parts (``inline_data`` images become ``data:`` URLs; other inline
      data raises :class:`~rxllm.ConfigurationError`).
    * model turns → one ``{"role": "assistant"}`` message with the answer text (``null`` when none)
      and ``tool_calls`` (arguments as a JSON string). Thought parts are never sent back.
    * each function response part (in any turn) → ``{"role": "tool", "tool_call_id", "content"}``
      with the response as a JSON string, before the turn's other parts. OpenAI requires call ids:
      a call without one gets ``call00001``, ``call00002``... (nine alphanumerics, the form Mistral
      demands), and a response without one takes the oldest such id of a call with the same name.
    * tools → ``tools: [{"type": "function", "function": {name, description, parameters}}]``.
      Built-in tools (``Tool(google_search=...)``, ``openai_web_search``...) are refused with a
      :class:`~rxllm.ConfigurationError`: Chat Completions runs none (use the Responses API).
    * ``tool_config.function_calling_config`` → ``tool_choice``, sent only with tools and only
      when a mode is set: ``AUTO`` → ``"auto"``, ``NONE`` → ``"none"``, ``ANY`` → ``"required"``,
      or with exactly one allowed name the named function (``{"type": "function", "function":
      {"name"}}``). Several allowed names (and allowed names with ``AUTO`` or no mode) restrict
      the ``tools`` sent to those functions, which every compatible server understands.
      ``VALIDATED`` has no equivalent and raises :class:`~rxllm.ConfigurationError`.
      ``parallel_tool_calls`` is sent as set; ``stream_function_call_arguments`` needs nothing
      (arguments always stream).
    * ``safety_settings``: a setting that only relaxes (``BLOCK_NONE``, ``OFF``) is a no-op; a
      blocking threshold raises :class:`~rxllm.ConfigurationError` (nothing could enforce it).
    * config: ``temperature``, ``top_p``, ``top_k`` (not an OpenAI parameter; api.openai.com rejects
      it, vLLM/llama.cpp/Ollama accept it), ``seed``, ``stop_sequences`` → ``stop``,
      ``candidate_count`` → ``n``, ``max_output_tokens`` → ``max_tokens`` (what every compatible
      server accepts; pass ``max_tokens_param="max_completion_tokens"`` for OpenAI's o-series and
      gpt-5 models, which reject ``max_tokens``), ``response_mime_type="application/json"`` →
      ``response_format`` ``json_schema`` (named ``"response"``, not ``strict``) when
      ``response_schema`` is set, else ``json_object``. ``thinking_config`` is not sent (Chat
      Completions has no portable equivalent).
    * streaming adds ``"stream": true`` and ``"stream_options": {"include_usage": true}``.

    Headers: ``Authorization: Bearer <key>`` only when a key is set (Ollama and llama.cpp need
    none), ``content-type: application/json``, ``accept: text/event-stream`` when streaming (else
    ``application/json``), then ``extra_headers`` and the request's ``http_options.headers``
    (which win over the defaults). ``extra_body`` (the model's, then the request's
    ``http_options.extra_body``: llama.cpp's ``ignore_eos``, vLLM's ``guided_json``, OpenRouter's
    ``provider``) is merged into the body as :class:`JsonRequestMapper` says. The repr never
    shows the key.

    >>> from rxllm import Content, LlmRequest, Part
    >>> mapper = OpenAiChatRequestMapper(base_url="http://127.0.0.1:11434/v1/", api_key=None)
    >>> request = mapper.to_http_request(LlmRequest(contents=[Content(role="user", parts=[Part(text="Hi")])]),
    ...                                  model="qwen2.5", stream=True)
    >>> request.url, request.body
    ('http://127.0.0.1:11434/v1/chat/completions', b'{"model":"qwen2.5","messages":[{"role":"user","content":"Hi"}],\
"stream":true,"stream_options":{"include_usage":true}}')
    """

    __slots__ = ("_authorization", "_kept", "_max_tokens_param", "_url")

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        extra_headers: Mapping[str, str] | None = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
    ) -> None:
        """Create a mapper.

        Args:
            base_url: the API root, e.g. ``"https://api.openai.com/v1"`` (a trailing slash is ignored).
            api_key: the bearer token; ``None`` or ``""`` sends no ``Authorization`` header.
            extra_headers: more headers for every request (``OpenAI-Organization``, ``HTTP-Referer``...).
            max_tokens_param: the body key that carries ``max_output_tokens``.
            extra_body: more body members for every request (merged as :class:`JsonRequestMapper` says).
            extra_body_overrides: whether ``extra_body`` values replace rxllm's own.

        Raises:
            ConfigurationError: for an empty ``base_url`` or an unknown ``max_tokens_param``.
        """
        if not base_url or not base_url.strip():
            raise ConfigurationError("base_url must not be empty", provider=_PROVIDER)
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ConfigurationError(
                f"max_tokens_param must be 'max_tokens' or 'max_completion_tokens', got {max_tokens_param!r}",
                provider=_PROVIDER,
            )
        super().__init__(
            provider=_PROVIDER,
            base_url=base_url.strip().rstrip("/"),
            api_key=api_key or None,
            extra_headers=extra_headers,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        self._max_tokens_param = max_tokens_param
        # Built once: neither the base URL nor the key changes after construction.
        self._url = self._endpoint("/chat/completions")
        self._authorization: dict[str, str] = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._kept = KeptByConfig()  # the JSON of each config's members (see _config_wire)

    def _repr_settings(self) -> dict[str, object]:
        return {"max_tokens_param": self._max_tokens_param}

    def to_http_request(self, llm_request: LlmRequest, *, model: str, stream: bool) -> HttpRequest:
        """Build the ``/chat/completions`` request for ``model``.

        The body is :func:`~rxllm.providers._wire.body_json` of :meth:`to_body` (with any
        ``extra_body`` merged in). A request with options and no extra body is written without the
        dict: its config's members (system message, tools, tool choice, sampling options) are
        encoded once per config object and kept (:meth:`_config_wire`), the rest per request; the
        text is the same.

        Raises:
            ConfigurationError: for parts, roles or options Chat Completions cannot express.
        """
        config = llm_request.config
        http_options = config.http_options
        if config.model_fields_set and not self._merges_extra_body(http_options):
            text = self._spliced_json(llm_request, model, stream)
            if text is not None:
                return self._post_json(self._url, text, stream=stream, provider_headers=self._authorization,
                                       http_options=http_options)
        return self._post(
            self._url,
            self.to_body(llm_request, model=model, stream=stream),
            stream=stream,
            provider_headers=self._authorization,  # read only (_post copies it into the request's headers)
            http_options=http_options,
        )

    def _spliced_json(self, llm_request: LlmRequest, model: str, stream: bool) -> str | None:
        """``body_json(self.to_body(...))`` from the config's kept JSON and the request's messages;
        ``None`` when the config has no kept form or anything fails (then :meth:`to_body` runs and
        raises what it raises, in its order)."""
        wire = self._config_wire(llm_request.config)
        if wire is None:
            return None
        system, tail = wire
        try:
            messages = body_json(_messages(llm_request, system=False))
            tail_text = render_kept(tail)
        except (ConfigurationError, TypeError, ValueError, RecursionError):
            return None
        if system is not None:  # the system message goes first
            messages = f"[{system}]" if messages == "[]" else f"[{system},{messages[1:]}"
        return (f'{{"model":{body_json(model)},"messages":{messages}{tail_text}'
                f'{_STREAM_MEMBERS if stream else ""}}}')

    def _config_wire(self, config: GenerateContentConfig) -> _ConfigWire | None:
        """The JSON of what :meth:`to_body` takes from ``config`` alone: the system message, and the
        members after ``messages`` (tools, tool choice, options), built once per config object
        (:class:`~rxllm.providers._wire.KeptByConfig`), each declaration's ``parameters`` encoded per
        request (:func:`~rxllm.providers._wire.kept_json`). ``None`` for a config :meth:`to_body`
        refuses, or one with a ``response_schema`` (its schema is built per request)."""
        return self._kept.get(config, self._build_config_wire)

    def _build_config_wire(self, config: GenerateContentConfig) -> _ConfigWire | None:
        if config.response_schema is not None:
            return None
        try:  # to_body's steps for the config, in its order
            check_gemini_only_options(config, api=_API, provider=_PROVIDER)
            for field, _ in built_in_tools(config):
                raise refuse_built_in(field, api=_API, provider=_PROVIDER)
            choice = tool_choice(config, provider=_PROVIDER)
            wire_choice = openai_tool_choice(choice, api=_API, named=_named_function)
            members: dict[str, Any] = {}
            tools = [_tool(declaration, slot=True) for declaration in choice.declarations(api_takes_names=False)]
            add_openai_tools(members, tools, choice, wire_choice)
            self._add_config(members, config)
            system = _system_message(config)
            return (body_json(system) if system is not None else None), kept_members(members)
        except (ConfigurationError, TypeError, ValueError, RecursionError):
            return None

    def to_body(self, llm_request: LlmRequest, *, model: str, stream: bool) -> dict[str, Any]:
        """The JSON body of :meth:`to_http_request`, as a dict, before any ``extra_body`` is
        merged in (for tests and debugging).

        Raises:
            ConfigurationError: for parts, roles or options Chat Completions cannot express.
        """
        config = llm_request.config
        if not config.model_fields_set:  # every option at its default (None): nothing to check or add
            body: dict[str, Any] = {"model": model, "messages": _messages(llm_request)}
        else:
            check_gemini_only_options(config, api=_API, provider=_PROVIDER)
            for field, _ in built_in_tools(config):
                raise refuse_built_in(field, api=_API, provider=_PROVIDER)
            choice = tool_choice(config, provider=_PROVIDER)
            wire_choice = openai_tool_choice(choice, api=_API, named=_named_function)
            body = {"model": model, "messages": _messages(llm_request)}
            tools = [_tool(declaration) for declaration in choice.declarations(api_takes_names=False)]
            add_openai_tools(body, tools, choice, wire_choice)
            self._add_config(body, config)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _add_config(self, body: dict[str, Any], config: GenerateContentConfig) -> None:
        body.update(
            wire_config(
                config,
                (
                    ("temperature", "temperature"),
                    ("top_p", "top_p"),
                    ("top_k", "top_k"),
                    ("max_output_tokens", self._max_tokens_param),
                    ("stop_sequences", "stop"),
                    ("seed", "seed"),
                    ("candidate_count", "n"),
                ),
            )
        )
        mime = config.response_mime_type
        if config.response_schema is not None:  # implies JSON: structured output, strict mode
            if mime not in (None, "application/json"):
                raise ConfigurationError(f"response_schema needs JSON output, not {mime!r}", provider=_PROVIDER)
            schema = output_schema(config.response_schema)
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": schema.strict_schema(), "strict": True},
            }
        elif mime == "application/json":
            body["response_format"] = {"type": "json_object"}
        elif mime not in (None, "text/plain"):
            raise ConfigurationError(
                f"response_mime_type {mime!r} is not supported by Chat Completions "
                "(use 'application/json' or 'text/plain')",
                provider=_PROVIDER,
            )


def openai_tool_choice(
    choice: ToolChoice, *, api: str, named: Callable[[str], dict[str, Any]]
) -> str | dict[str, Any] | None:
    """OpenAI's ``tool_choice`` for ``choice`` (Chat Completions and Responses; ``named`` builds the
    API's named-function choice), or ``None`` when no mode is set.

    Raises:
        ConfigurationError: mode ``VALIDATED``, which OpenAI cannot express.
    """
    mode = choice.mode
    if mode is None:
        return None
    if mode is FunctionCallingConfigMode.AUTO:
        return "auto"
    if mode is FunctionCallingConfigMode.NONE:
        return "none"
    if mode is FunctionCallingConfigMode.ANY:
        forced = choice.forced_name
        return named(forced) if forced is not None else "required"
    raise ConfigurationError(
        f"function calling mode {mode!s} has no {api} equivalent (only Gemini constrains calls to the "
        "declared schemas); use ANY or AUTO",
        provider=_PROVIDER,
    )


def add_openai_tools(
    body: dict[str, Any], tools: list[dict[str, Any]], choice: ToolChoice, wire_choice: str | dict[str, Any] | None
) -> None:
    """``tools`` into ``body`` and, only with tools, their ``tool_choice`` and ``parallel_tool_calls``
    (Chat Completions and Responses)."""
    if tools:
        body["tools"] = tools
        if wire_choice is not None:
            body["tool_choice"] = wire_choice
        if choice.parallel is not None:
            body["parallel_tool_calls"] = choice.parallel


def _named_function(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _tool(declaration: FunctionDeclaration, *, slot: bool = False) -> dict[str, Any]:
    function: dict[str, Any] = {"name": declaration.name}
    if declaration.description is not None:
        function["description"] = declaration.description
    if declaration.parameters is not None:
        function["parameters"] = ParametersSlot(declaration) if slot else declaration.parameters
    return {"type": "function", "function": function}


_ConfigWire = tuple[str | None, KeptJson]
"""A config's kept JSON: the system message, and the members after ``messages``."""

_STREAM_MEMBERS = ',"stream":true,"stream_options":{"include_usage":true}'


def _system_message(config: GenerateContentConfig) -> dict[str, Any] | None:
    system = config.system_instruction
    if system is not None:
        text = system.text()
        if text:
            return {"role": "system", "content": text}
    return None


def _messages(llm_request: LlmRequest, *, system: bool = True) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if system:
        message = _system_message(llm_request.config)
        if message is not None:
            messages.append(message)
    ids = CallIdPairing("call{:05d}", provider=_PROVIDER)  # 9 alphanumerics: also valid for Mistral
    for content in llm_request.contents:
        role = content.role or "user"
        tool_messages = [
            {
                "role": "tool",
                "tool_call_id": ids.for_response(p.function_response.name, p.function_response.id),
                "content": json_text(p.function_response.response),
            }
            for p in content.parts
            if p.function_response is not None
        ]
        messages.extend(tool_messages)
        parts = [p for p in content.parts if p.function_response is None and not p.thought]
        if not parts:
            continue
        if role in ("model", "assistant"):
            messages.append(_assistant_message(parts, ids))
        elif role in ("user", "tool"):
            messages.append({"role": "user", "content": _user_content(parts)})
        elif role == "system":
            messages.append({"role": "system", "content": _plain_text(parts, role)})
        else:
            raise ConfigurationError(f"unsupported content role {role!r}", provider=_PROVIDER)
    return messages


def _assistant_message(parts: list[Part], ids: CallIdPairing) -> dict[str, Any]:
    text: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for part in parts:
        call = part.function_call
        if call is not None:
            tool_calls.append(
                {
                    "id": ids.for_call(call.name, call.id),
                    "type": "function",
                    "function": {"name": call.name, "arguments": json_text(call.args)},
                }
            )
        elif part.text is not None:
            text.append(part.text)
        else:
            raise ConfigurationError(
                "a model turn may hold only text and function calls for Chat Completions", provider=_PROVIDER
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _plain_text(parts: list[Part], role: str) -> str:
    if any(p.text is None for p in parts):
        raise ConfigurationError(f"a {role!r} turn may hold only text for Chat Completions", provider=_PROVIDER)
    return "".join(p.text or "" for p in parts)


def _user_content(parts: list[Part]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and parts[0].text is not None and parts[0].function_call is None:
        return parts[0].text
    items: list[dict[str, Any]] = []
    for part in parts:
        if part.function_call is not None:
            raise ConfigurationError("a user turn cannot hold a function call", provider=_PROVIDER)
        if part.text is not None:
            items.append({"type": "text", "text": part.text})
        elif part.inline_data is not None:
            blob = part.inline_data
            if not blob.mime_type.startswith("image/"):
                raise ConfigurationError(
                    f"inline data of type {blob.mime_type!r} is not supported (only images)", provider=_PROVIDER
                )
            items.append({"type": "image_url", "image_url": {"url": data_url(blob.mime_type, blob.data)}})
        else:
            raise ConfigurationError("a user part must hold text or an inline image", provider=_PROVIDER)
    return items
