"""Gemini (``generativelanguage.googleapis.com``): the chunk parser and the request mapper.

Pure translation, no I/O. :class:`GeminiChunkParser` turns each SSE event of
``:streamGenerateContent?alt=sse`` (one ``GenerateContentResponse`` JSON per event, CRLF framed,
no end sentinel) into one :class:`~rxllm.Chunk`; :class:`GeminiRequestMapper` turns an
:class:`~rxllm.LlmRequest` into the HTTP request, the API key in the ``x-goog-api-key`` header.

Parser rules (candidate 0 only; every part of one event goes into ONE chunk):

* ``text`` parts concatenate into ``text_delta``; parts with ``"thought": true`` into
  ``thought_delta``. ``thoughtSignature`` (base64 on the wire, bytes here) on a thought part
  becomes ``thought_signature`` (it closes the reasoning block), on any other non-call part
  ``text_signature``, on a ``functionCall`` part the fragment's ``thought_signature``.
* A whole ``functionCall`` becomes one ``ToolCallFragment(complete=True)`` whose ``index`` is
  the n-th call of the stream, ``id`` the call's ``id`` (``None`` when absent: the aggregator
  then generates an ``adk-`` id) and ``arguments_delta`` the JSON of ``args``.
* Streamed arguments (``toolConfig.functionCallingConfig.streamFunctionCallArguments``; Vertex
  documents it, the Gemini API may not send it): a call starts with a ``functionCall`` that has
  a ``name`` and ``"willContinue": true``; later ``functionCall`` parts (name and id optional,
  and if present they must match) carry ``partialArgs`` entries ``{jsonPath, stringValue |
  numberValue | boolValue | nullValue, willContinue}``. Each value is set at its JSON path
  (RFC 9535 subset: ``$``, ``.name``, ``['name']``, ``[0]``; containers are created on the way,
  lists padded with ``null``); a string arriving at a path that already holds a string is
  appended to it, as ADK's ``StreamingResponseAggregator`` does. The call stays open while its
  ``functionCall`` says ``"willContinue": true`` (a ``functionCall`` without ``willContinue``
  stays open when one of its ``partialArgs`` says it); the first part that does not ends the
  call, and the complete call is emitted then. An empty ``functionCall: {}``
  is the end marker: it closes an open call and is ignored otherwise. A call still open when a
  ``finishReason`` arrives is emitted as the unterminated JSON it has so far, so the aggregator
  treats it like any cut-off call (left out and named after a non-STOP finish,
  :class:`~rxllm.MalformedFunctionCallError` after STOP).
* ``usageMetadata`` is cumulative: it is emitted on every chunk that has it (the aggregator keeps
  the last). ``finishReason`` maps to :class:`~rxllm.FinishReason` by name (unknown: ``OTHER``)
  and is kept raw in ``raw_finish_reason``. ``modelVersion`` becomes ``model_version`` and
  ``responseId`` ``response_id`` (a chunk with nothing else is still skipped). A chunk
  with a finish reason ends the turn, but ``end_of_stream`` stays ``False``: the body is read to
  EOF, and the aggregator's ``is_complete`` already knows the turn is over.
* A blocked prompt (``promptFeedback.blockReason``, no candidates) becomes an
  ``InBandError(code=blockReason, retryable=False)`` with finish reason ``SAFETY``. It arrives
  before anything was shown, so the aggregator raises it as :class:`~rxllm.ProviderError` --
  the right outcome: the request was refused, there is no turn to record, and a retry of the
  same prompt would be refused again. An ``error`` object becomes an ``InBandError`` too
  (retryable for ``RESOURCE_EXHAUSTED`` / ``UNAVAILABLE`` / ``INTERNAL`` / ``DEADLINE_EXCEEDED``
  and HTTP-like codes 408/429/5xx).
* Parts of other kinds (``inlineData``, ``executableCode``...) are not represented in a chunk
  and are skipped. Bad JSON and wrong shapes raise :class:`~rxllm.ProtocolError`, nothing else.

Mapper decisions: a tool's JSON-schema ``parameters`` go in ``parametersJsonSchema`` and
``response_schema`` in ``generationConfig.responseJsonSchema`` (the JSON Schema fields; the
older ``parameters`` / ``responseSchema`` take an OpenAPI subset that rejects common JSON Schema
such as ``additionalProperties`` or ``$ref``). Function responses are sent in ``user`` turns, as
ADK does; ids rxllm generated (``adk-`` prefix) are never sent. Contents with no sendable part
are dropped (the API rejects empty ``parts``); ``system``-role contents join the
``systemInstruction``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypedDict, cast
from urllib.parse import quote

from pydantic import JsonValue

from .._core.errors import ConfigurationError, ProtocolError
from .._core.genai_types import FunctionCallingConfigMode
from .._core.json_codec import loads
from .._core.schema import output_schema
from .._core.types import (
    FinishReason,
    FunctionCall,
    FunctionResponse,
    GenerateContentConfig,
    LlmRequest,
    Part,
    UsageMetadata,
)
from .._models.aggregation import GENERATED_ID_PREFIX
from .._models.chunk import Chunk, InBandError, ToolCallFragment
from .._models.sse import SseEvent
from .._transports.base import HttpRequest
from ._wire import (
    ConfigField,
    JsonRequestMapper,
    KeptByConfig,
    KeptJson,
    ParametersSlot,
    ToolChoice,
    WireReader,
    body_json,
    json_text,
    kept_members,
    refuse_built_in,
    render_kept,
    tool_choice,
    wire_config,
)

__all__ = ["DEFAULT_GEMINI_BASE_URL", "GeminiChunkParser", "GeminiRequestMapper"]

DEFAULT_GEMINI_BASE_URL: Final = "https://generativelanguage.googleapis.com"
_PROVIDER: Final = "gemini"
_wire: Final = WireReader(_PROVIDER)

_FINISH_REASONS: Final = {reason.value: reason for reason in FinishReason}
_RETRYABLE_STATUSES: Final = frozenset({"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"})
_RETRYABLE_CODES: Final = frozenset({408, 429, 500, 502, 503, 504})
_MAX_PATH_SEGMENTS: Final = 64
_MAX_LIST_INDEX: Final = 10_000
_tuple_new = tuple.__new__


# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------


class _OpenCall:
    """A streamed function call whose arguments are still arriving."""

    __slots__ = ("args", "id", "index", "name", "signature")

    def __init__(self, index: int, name: str, call_id: str | None, signature: bytes | None) -> None:
        self.index = index
        self.name = name
        self.id = call_id
        self.signature = signature
        self.args: dict[str, Any] = {}


class GeminiChunkParser:
    """Parses Gemini ``streamGenerateContent?alt=sse`` events into :class:`~rxllm.Chunk` s.

    One instance per stream: it counts the stream's function calls (their ``index``) and holds
    the one call whose arguments are being streamed, if any. See the module docstring for the
    full mapping.

    >>> from rxllm import SseEvent
    >>> p = GeminiChunkParser()
    >>> c = p.parse(SseEvent(data='{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}]}'))
    >>> c.text_delta, c.finish_reason, c.raw_finish_reason
    ('Hi', <FinishReason.STOP: 'STOP'>, 'STOP')
    """

    __slots__ = ("_call_count", "_open")

    def __init__(self) -> None:
        self._call_count = 0
        self._open: _OpenCall | None = None

    def parse(self, event: SseEvent) -> Chunk | None:
        """The chunk for one SSE event, or ``None`` when the event carries nothing.

        Raises:
            ProtocolError: the data is not JSON, or not a ``GenerateContentResponse`` shape.
        """
        try:
            payload = loads(event[1])
        except (ValueError, TypeError):
            return self._chunk(_wire.decode(event.data, "event"))  # raises the ProtocolError
        if type(payload) is dict and "error" not in payload and "promptFeedback" not in payload:
            # The hot path, checked inline: the first candidate, no finish yet, one plain text part.
            # Each subscript or unpacking stands for a shape check: it fails (and the general path
            # decides) unless ``candidates`` is a list, its first item and ``content`` are objects,
            # ``parts`` holds exactly one item and that one is an object with a ``text``.
            try:
                candidate = payload["candidates"][0]
                (part,) = candidate["content"]["parts"]
                text = part["text"]
            except (KeyError, TypeError, ValueError, IndexError):
                text = None  # (the general path is called outside the handler: no chained context)
            if type(text) is str and text and len(part) == 1 and candidate.get("finishReason") is None:
                model_version = payload.get("modelVersion")
                if model_version is None or type(model_version) is str:
                    m = model_version or None
                    r = payload.get("responseId")
                    r = r if type(r) is str else None
                    u = _usage(payload) if "usageMetadata" in payload else None
                    # text_chunk(text, m, r, u) without its frame (tests/test_chunk_fast_paths.py)
                    return _tuple_new(Chunk, (text, None, (), None, u, None, None, None, None, None, None, m, False, r))
        return self._chunk(payload)

    def parse_response(self, body: bytes) -> Sequence[Chunk]:
        """The chunks of a non-streamed ``:generateContent`` body (one response object).

        A JSON array of responses (``:streamGenerateContent`` without ``alt=sse``) is accepted too.

        Raises:
            ProtocolError: the body is not UTF-8 JSON of the expected shape.
        """
        payload = _wire.decode(body, "response body")
        items = payload if isinstance(payload, list) else [payload]
        parser = GeminiChunkParser()  # a body is a stream of its own: never share call state
        chunks: list[Chunk] = []
        for item in items:
            chunk = parser._chunk(item)
            if chunk is not None:
                chunks.append(chunk)
        return chunks

    def _chunk(self, payload: object) -> Chunk | None:
        payload = _wire.expect(payload, dict, "GenerateContentResponse")
        error = payload.get("error")
        if error is not None:
            return Chunk(error=_in_band_error(error))

        texts: list[str] = []
        thoughts: list[str] = []
        text_signature: bytes | None = None
        thought_signature: bytes | None = None
        fragments: list[ToolCallFragment] = []
        finish_reason: FinishReason | None = None
        raw_finish_reason: str | None = None
        in_band: InBandError | None = None

        candidates = _wire.list_at(payload, "candidates", "GenerateContentResponse")
        if candidates:
            candidate = _wire.expect(candidates[0], dict, "candidates[0]")
            for part in _parts_of(candidate):
                signature = _signature(part.get("thoughtSignature"))
                call = part.get("functionCall")
                if call is not None:
                    fragment = self._function_call(call, signature)
                    if fragment is not None:
                        fragments.append(fragment)
                    continue
                text = part.get("text")
                if text is not None and not isinstance(text, str):
                    raise _wire.wrong("part.text", "a string", text)
                thought = part.get("thought")
                if thought is not None and not isinstance(thought, bool):
                    raise _wire.wrong("part.thought", "a boolean", thought)
                if thought:
                    if text:
                        thoughts.append(text)
                    if signature is not None:
                        thought_signature = signature
                else:
                    if text:
                        texts.append(text)
                    if signature is not None:
                        text_signature = signature
            raw = _wire.optional_string_at(candidate, "finishReason", "candidates[0]")
            if raw is not None:
                raw_finish_reason = raw
                finish_reason = _FINISH_REASONS.get(raw, FinishReason.OTHER)

        feedback = _wire.optional_object_at(payload, "promptFeedback", "GenerateContentResponse")
        if feedback is not None:
            block = _wire.optional_string_at(feedback, "blockReason", "promptFeedback")
            if block and block != "BLOCK_REASON_UNSPECIFIED":
                detail = feedback.get("blockReasonMessage")
                message = f"the prompt was blocked ({block})"
                if isinstance(detail, str) and detail:
                    message += f": {detail}"
                in_band = InBandError(message, code=block, retryable=False)
                if finish_reason is None:
                    finish_reason = FinishReason.SAFETY

        if finish_reason is not None and self._open is not None:
            fragments.append(self._cut_off_open_call())

        usage = _usage(payload)
        model_version = _wire.optional_string_at(payload, "modelVersion", "GenerateContentResponse")
        response_id = payload.get("responseId")

        if not (
            texts
            or thoughts
            or fragments
            or model_version
            or in_band is not None
            or usage is not None
            or finish_reason is not None
            or text_signature is not None
            or thought_signature is not None
        ):
            return None
        return Chunk(
            text_delta="".join(texts) if texts else None,
            thought_delta="".join(thoughts) if thoughts else None,
            tool_call_fragments=tuple(fragments),
            finish_reason=finish_reason,
            usage=usage,
            raw_finish_reason=raw_finish_reason,
            error=in_band,
            thought_signature=thought_signature,
            text_signature=text_signature,
            model_version=model_version or None,
            response_id=response_id if type(response_id) is str else None,
        )

    def _function_call(self, call: object, signature: bytes | None) -> ToolCallFragment | None:
        call = _wire.expect(call, dict, "part.functionCall")
        name = _wire.optional_string_at(call, "name", "functionCall")
        call_id = _wire.optional_string_at(call, "id", "functionCall")
        args = _wire.optional_object_at(call, "args", "functionCall")
        partial_args = _wire.list_at(call, "partialArgs", "functionCall")
        will_continue = call.get("willContinue")
        if will_continue is not None and not isinstance(will_continue, bool):
            raise _wire.wrong("functionCall.willContinue", "a boolean", will_continue)

        current = self._open
        if current is None:
            if not (name or call_id or args or partial_args or will_continue):
                return None  # an empty end marker after a call that is already complete
            if not name:
                raise ProtocolError(
                    "a functionCall without a name arrived while no streamed call was in progress",
                    provider=_PROVIDER,
                )
            current = _OpenCall(self._call_count, name, call_id, signature)
            self._call_count += 1
        else:
            if name and name != current.name:
                raise ProtocolError(
                    f"a functionCall named {name!r} arrived while the streamed call {current.name!r} "
                    "was still in progress",
                    provider=_PROVIDER,
                )
            if call_id:
                if current.id is None:
                    current.id = call_id
                elif call_id != current.id:
                    raise ProtocolError(
                        f"a functionCall with id {call_id!r} arrived while the streamed call "
                        f"{current.id!r} was still in progress",
                        provider=_PROVIDER,
                    )
            if current.signature is None:
                current.signature = signature
        if args:
            current.args.update(args)
        any_continues = False
        for partial_arg in partial_args or ():
            any_continues = _apply_partial_arg(current.args, partial_arg) or any_continues
        if will_continue if will_continue is not None else any_continues:
            self._open = current
            return None
        self._open = None
        return ToolCallFragment(
            index=current.index,
            id=current.id,
            name=current.name,
            arguments_delta=_dump_args(current.args),
            complete=True,
            thought_signature=current.signature,
        )

    def _cut_off_open_call(self) -> ToolCallFragment:
        current = self._open
        assert current is not None
        self._open = None
        # The JSON text so far, minus its closing brace: never parses, exactly like a call whose
        # argument text was cut off, so the aggregator's rules for cut-off calls apply.
        return ToolCallFragment(
            index=current.index,
            id=current.id,
            name=current.name,
            arguments_delta=_dump_args(current.args)[:-1],
            complete=False,
            thought_signature=current.signature,
        )


def _parts_of(candidate: dict[str, Any]) -> list[dict[str, Any]]:
    content = _wire.optional_object_at(candidate, "content", "candidates[0]")
    if content is None:
        return []
    parts = _wire.list_at(content, "parts", "candidates[0].content")
    for part in parts:
        _wire.expect(part, dict, "candidates[0].content.parts[]")
    return parts


def _signature(value: object) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _wire.wrong("part.thoughtSignature", "a base64 string", value)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        pass
    try:  # proto3 JSON also accepts the URL-safe alphabet
        return base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError("a 'thoughtSignature' is not valid base64", provider=_PROVIDER) from exc


def _usage(payload: dict[str, Any]) -> UsageMetadata | None:
    raw = _wire.usage_object_at(payload, "usageMetadata", "GenerateContentResponse")
    if raw is None:
        return None
    return UsageMetadata(
        prompt_token_count=_wire.count_at(raw, "promptTokenCount", "usageMetadata"),
        candidates_token_count=_wire.count_at(raw, "candidatesTokenCount", "usageMetadata"),
        total_token_count=_wire.count_at(raw, "totalTokenCount", "usageMetadata"),
        thoughts_token_count=_wire.count_at(raw, "thoughtsTokenCount", "usageMetadata"),
        cached_content_token_count=_wire.count_at(raw, "cachedContentTokenCount", "usageMetadata"),
    )


def _in_band_error(error: object) -> InBandError:
    if isinstance(error, str):
        return InBandError(error or "the provider reported an error")
    error = _wire.expect(error, dict, "error")
    message = error.get("message")
    status = error.get("status")
    code = error.get("code")
    text = message if isinstance(message, str) and message else "the provider reported an error"
    if isinstance(status, str) and status:
        code_text: str | None = status
    elif isinstance(code, int | str) and not isinstance(code, bool):
        code_text = str(code)
    else:
        code_text = None
    retryable = (isinstance(status, str) and status in _RETRYABLE_STATUSES) or (
        isinstance(code, int) and code in _RETRYABLE_CODES
    )
    return InBandError(text, code=code_text, retryable=retryable)


def _dump_args(args: dict[str, Any]) -> str:
    try:
        return json_text(args)
    except (RecursionError, ValueError) as exc:
        raise ProtocolError("streamed function-call arguments nest too deeply", provider=_PROVIDER) from exc


_PATH_TOKEN = re.compile(
    r"""\.(?P<name>[^.\[\]]+)"""  # .name
    r"""|\[(?P<index>\d+)\]"""  # [0]
    r"""|\['(?P<sq>(?:[^'\\]|\\.)*)'\]"""  # ['name']
    r"""|\["(?P<dq>(?:[^"\\]|\\.)*)"\]"""  # ["name"]
)
_ESCAPE = re.compile(r"\\(.)")


def _parse_json_path(path: str) -> list[str | int]:
    """``$.a['b'][0]`` -> ``["a", "b", 0]`` (a name-and-index subset of RFC 9535)."""
    if not path.startswith("$"):
        path = "$." + path  # tolerate a bare member name, as ADK does
    tokens: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            raise ProtocolError(f"unsupported partialArgs jsonPath {path!r}", provider=_PROVIDER)
        if match.group("index") is not None:
            tokens.append(int(match.group("index")))
        else:
            name = match.group("name")
            if name is None:
                quoted = match.group("sq") if match.group("sq") is not None else match.group("dq")
                name = _ESCAPE.sub(r"\1", quoted)
            tokens.append(name)
        pos = match.end()
        if len(tokens) > _MAX_PATH_SEGMENTS:
            raise ProtocolError("a partialArgs jsonPath is too deep", provider=_PROVIDER)
    return tokens


def _apply_partial_arg(args: dict[str, Any], partial_arg: object) -> bool:
    """Merge one ``PartialArg`` into ``args``; return its ``willContinue``."""
    partial_arg = _wire.expect(partial_arg, dict, "functionCall.partialArgs[]")
    path = partial_arg.get("jsonPath")
    if not isinstance(path, str) or not path:
        raise _wire.wrong("functionCall.partialArgs[].jsonPath", "a non-empty string", path)
    will_continue = partial_arg.get("willContinue") is True
    value: Any
    if "stringValue" in partial_arg:
        value = partial_arg["stringValue"]
        if not isinstance(value, str):
            raise _wire.wrong("functionCall.partialArgs[].stringValue", "a string", value)
    elif "numberValue" in partial_arg:
        value = partial_arg["numberValue"]
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _wire.wrong("functionCall.partialArgs[].numberValue", "a number", value)
    elif "boolValue" in partial_arg:
        value = partial_arg["boolValue"]
        if not isinstance(value, bool):
            raise _wire.wrong("functionCall.partialArgs[].boolValue", "a boolean", value)
    elif "nullValue" in partial_arg:
        value = None
    else:
        return will_continue  # no value yet: only announces the path
    tokens = _parse_json_path(path)
    if not tokens:
        raise ProtocolError("a partialArgs value at '$' would replace the arguments object", provider=_PROVIDER)
    _set_at_path(args, tokens, value, path)
    return will_continue


def _set_at_path(args: dict[str, Any], tokens: list[str | int], value: Any, path: str) -> None:
    container: Any = args
    for position, token in enumerate(tokens):
        last = position == len(tokens) - 1
        following = None if last else tokens[position + 1]
        if isinstance(token, str):
            if not isinstance(container, dict):
                raise ProtocolError(f"partialArgs path {path!r} names a member of a non-object", provider=_PROVIDER)
            if last:
                existing = container.get(token)
                container[token] = existing + value if isinstance(existing, str) and isinstance(value, str) else value
                return
            if token not in container or container[token] is None:
                container[token] = [] if isinstance(following, int) else {}
            container = container[token]
        else:
            if not isinstance(container, list):
                raise ProtocolError(f"partialArgs path {path!r} indexes a non-array", provider=_PROVIDER)
            if token > _MAX_LIST_INDEX:
                raise ProtocolError(f"partialArgs path {path!r} has an index out of range", provider=_PROVIDER)
            if token >= len(container):
                container.extend([None] * (token + 1 - len(container)))
            if last:
                existing = container[token]
                container[token] = existing + value if isinstance(existing, str) and isinstance(value, str) else value
                return
            if container[token] is None:
                container[token] = [] if isinstance(following, int) else {}
            container = container[token]


# --------------------------------------------------------------------------------------------
# request mapper
# --------------------------------------------------------------------------------------------


class _WireBlob(TypedDict):
    mimeType: str
    data: str


class _WireFunctionCall(TypedDict, total=False):
    id: str
    name: str
    args: dict[str, Any]


class _WireFunctionResponse(TypedDict, total=False):
    id: str
    name: str
    response: dict[str, Any]


class _WirePart(TypedDict, total=False):
    text: str
    thought: bool
    thoughtSignature: str
    functionCall: _WireFunctionCall
    functionResponse: _WireFunctionResponse
    inlineData: _WireBlob


class _WireContent(TypedDict, total=False):
    role: str
    parts: list[_WirePart]


class _WireFunctionDeclaration(TypedDict, total=False):
    name: str
    description: str
    parametersJsonSchema: dict[str, Any]


class _WireTool(TypedDict, total=False):
    functionDeclarations: list[_WireFunctionDeclaration]
    googleSearch: dict[str, Any]
    codeExecution: dict[str, Any]
    urlContext: dict[str, Any]


class _WireFunctionCallingConfig(TypedDict, total=False):
    mode: str
    allowedFunctionNames: list[str]
    streamFunctionCallArguments: bool


class _WireToolConfig(TypedDict, total=False):
    functionCallingConfig: _WireFunctionCallingConfig
    retrievalConfig: dict[str, Any]
    includeServerSideToolInvocations: bool


class _WireThinkingConfig(TypedDict, total=False):
    includeThoughts: bool
    thinkingBudget: int


class _WireGenerationConfig(TypedDict, total=False):
    temperature: float
    topP: float
    topK: int
    maxOutputTokens: int
    stopSequences: list[str]
    candidateCount: int
    seed: int
    responseMimeType: str
    responseJsonSchema: dict[str, Any]
    thinkingConfig: _WireThinkingConfig


class _WireRequest(TypedDict, total=False):
    contents: list[_WireContent]
    systemInstruction: _WireContent
    tools: list[_WireTool]
    toolConfig: _WireToolConfig
    safetySettings: list[dict[str, Any]]
    generationConfig: _WireGenerationConfig


_MODEL_ROLES: Final = frozenset({"model", "assistant"})


class GeminiRequestMapper(JsonRequestMapper):
    """Maps an :class:`~rxllm.LlmRequest` to a Gemini ``generateContent`` HTTP request.

    Streaming posts to ``{base_url}/{api_version}/models/{model}:streamGenerateContent?alt=sse``,
    non-streaming to ``...:generateContent``. The API key travels in the ``x-goog-api-key``
    header, never in the URL, and never appears in a repr.

    Args:
        base_url: the API root (a proxy or a loopback stub in tests).
        api_key: the Gemini API key; ``None`` sends no key header (a proxy that adds it).
        api_version: ``"v1beta"`` (default; the JSON-schema fields and thinking need it) or ``"v1"``.
        extra_headers: headers added to every request.
        extra_body: more body members for every request, merged as :class:`JsonRequestMapper` says
            (the request's ``http_options.extra_body`` is merged over it, as genai merges its
            ``HttpOptions.extra_body``).
        extra_body_overrides: whether ``extra_body`` values replace rxllm's own.

    Tools and tool options, as genai sends them: each :class:`~rxllm.Tool` becomes one wire tool
    with its ``functionDeclarations`` (schemas as ``parametersJsonSchema``) and its built-in
    tools (``googleSearch``, ``codeExecution``, ``urlContext``); another provider's built-in tool
    raises :class:`~rxllm.ConfigurationError`. ``tool_config`` becomes ``toolConfig``:
    ``functionCallingConfig`` with ``mode`` and ``allowedFunctionNames`` (with ``ANY`` and
    ``VALIDATED``; with ``AUTO`` or no mode, which the API does not allow them with, the names
    restrict the declarations sent instead), plus ``retrievalConfig`` and
    ``includeServerSideToolInvocations``. ``parallel_tool_calls=False`` cannot be expressed and
    raises. ``safety_settings`` become ``safetySettings``. The fields genai refuses for the Gemini
    API as Vertex AI's (a safety setting's ``method``, ``google_search``'s ``exclude_domains`` and
    ``blocking_confidence``, ``stream_function_call_arguments``) raise
    :class:`~rxllm.ConfigurationError` here too; ``extra_body`` can still send them.

    Raises:
        ConfigurationError: for an empty base URL or API version, or a key that is not one line.

    >>> from rxllm import LlmRequest, Content, Part
    >>> mapper = GeminiRequestMapper(api_key="k")
    >>> request = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("Hi")])])
    >>> http = mapper.to_http_request(request, model="gemini-2.5-flash", stream=True)
    >>> http.url
    'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse'
    >>> http.body
    b'{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}'
    """

    __slots__ = ("_api_version", "_kept")

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_GEMINI_BASE_URL,
        api_key: str | None,
        api_version: str = "v1beta",
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
    ) -> None:
        if not base_url or not base_url.strip():
            raise ConfigurationError("base_url must not be empty", provider=_PROVIDER)
        if not api_version or "/" in api_version.strip("/") or not api_version.strip("/"):
            raise ConfigurationError(f"api_version must be one path segment, got {api_version!r}", provider=_PROVIDER)
        if api_key is not None and (not api_key or any(c in api_key for c in "\r\n\0")):
            raise ConfigurationError("api_key must be a non-empty single-line string", provider=_PROVIDER)
        super().__init__(
            provider=_PROVIDER,
            base_url=base_url.strip().rstrip("/"),
            api_key=api_key,
            extra_headers=extra_headers,
            extra_body=extra_body,
            extra_body_overrides=extra_body_overrides,
        )
        self._api_version = api_version.strip("/")
        self._kept = KeptByConfig()  # the JSON of each config's members (see _config_wire)

    def _repr_settings(self) -> dict[str, object]:
        return {"api_version": self._api_version}

    def to_http_request(self, llm_request: LlmRequest, *, model: str, stream: bool) -> HttpRequest:
        """The HTTP request for ``model`` (``"gemini-2.5-flash"`` or ``"models/gemini-2.5-flash"``).

        Raises:
            ConfigurationError: no model name, or content that cannot be encoded as JSON.
        """
        url = self._url(model, stream=stream)
        provider_headers = {"x-goog-api-key": self._api_key} if self._api_key is not None else {}
        config = llm_request.config
        http_options = config.http_options
        if config.model_fields_set and not self._merges_extra_body(http_options):
            text = self._spliced_json(llm_request)
            if text is not None:  # the text of the body dict, the config's members kept (_config_wire)
                return self._post_json(url, text, stream=stream, provider_headers=provider_headers,
                                       http_options=http_options)
        return self._post(
            url,
            self._body(llm_request),
            stream=stream,
            provider_headers=provider_headers,
            http_options=http_options,
        )

    def _spliced_json(self, request: LlmRequest) -> str | None:
        """``body_json(self._body(request))`` from the config's kept JSON and the request's contents;
        ``None`` when the config has no kept form or anything fails (then :meth:`_body` runs and
        raises what it raises, in its order)."""
        tail = self._kept.get(request.config, _config_wire)
        if tail is None:
            return None
        try:
            contents, system_parts = _contents(request)
            text = '{"contents":' + body_json(contents)
            if system_parts:
                text += ',"systemInstruction":' + body_json({"parts": system_parts})
            return text + render_kept(tail) + "}"
        except (ConfigurationError, TypeError, ValueError, RecursionError):
            return None

    def _url(self, model: str, *, stream: bool) -> str:
        name = model.strip() if model else ""
        if not name.startswith(("models/", "tunedModels/")):
            name = "models/" + name
        if name.endswith("/"):
            raise ConfigurationError("a model name is required for a Gemini request", provider=_PROVIDER)
        path = quote(name, safe="/-._~@")
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return self._endpoint(f"/{self._api_version}/{path}:{method}")

    def _body(self, request: LlmRequest) -> _WireRequest:
        config = request.config
        contents, system_parts = _contents(request)
        body: _WireRequest = {"contents": contents}
        if system_parts:
            body["systemInstruction"] = {"parts": system_parts}
        choice = tool_choice(config, provider=_PROVIDER)
        body.update(_config_members(config, choice, _tools(config, choice)))  # type: ignore[typeddict-item]
        return body


def _config_members(config: GenerateContentConfig, choice: ToolChoice, tools: list[_WireTool]) -> dict[str, Any]:
    """The body's members from ``config`` after the contents and system instruction, in their order."""
    members: dict[str, Any] = {}
    if tools:
        members["tools"] = tools
    tool_config = _tool_config(config, choice)
    if tool_config:
        members["toolConfig"] = tool_config
    if config.safety_settings:
        members["safetySettings"] = _safety_settings(config)
    generation = _generation_config(config)
    if generation:
        members["generationConfig"] = generation
    return members


def _contents(request: LlmRequest) -> tuple[list[_WireContent], list[_WirePart]]:
    """The request's contents, and the system parts (the config's instruction, then the system turns')."""
    config = request.config
    system_parts = _parts(config.system_instruction.parts) if config.system_instruction is not None else []
    contents: list[_WireContent] = []
    for content in request.contents:
        parts = _parts(content.parts)
        if not parts:
            continue  # the API rejects a content with no parts
        if content.role == "system":
            system_parts.extend(parts)
            continue
        contents.append({"role": "model" if content.role in _MODEL_ROLES else "user", "parts": parts})
    return contents, system_parts


def _config_wire(config: GenerateContentConfig) -> KeptJson | None:
    """What :meth:`GeminiRequestMapper._body` takes from ``config`` alone (tools, tool config,
    safety settings, generation config), as JSON, each declaration's ``parameters`` encoded per
    request (:func:`~rxllm.providers._wire.kept_json`); kept per config object
    (:class:`~rxllm.providers._wire.KeptByConfig`). ``None`` for a config ``_body`` refuses, or
    one with a ``response_schema`` (its schema is built per request)."""
    if config.response_schema is not None:
        return None
    try:  # _body's steps for the config, in its order
        choice = tool_choice(config, provider=_PROVIDER)
        tools = _tools(config, choice)
        # _tools' declarations in its order, each wire declaration's parameters a slot of its own
        offered = {d.name for d in choice.declarations(api_takes_names=True)}
        declarations = [d for tool in config.tools or () for d in tool.function_declarations if d.name in offered]
        wires = [wire for tool in tools for wire in tool.get("functionDeclarations", ())]
        if len(wires) != len(declarations):
            return None
        for declaration, wire in zip(declarations, wires, strict=True):
            if "parametersJsonSchema" in wire:
                cast(dict[str, Any], wire)["parametersJsonSchema"] = ParametersSlot(declaration)
        return kept_members(_config_members(config, choice, tools))
    except (ConfigurationError, TypeError, ValueError, RecursionError):
        return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _provider_id(call_id: str | None) -> str | None:
    return call_id if call_id and not call_id.startswith(GENERATED_ID_PREFIX) else None


def _function_call(call: FunctionCall) -> _WireFunctionCall:
    wire: _WireFunctionCall = {"name": call.name, "args": dict(call.args)}
    call_id = _provider_id(call.id)
    if call_id is not None:
        wire["id"] = call_id
    return wire


def _function_response(response: FunctionResponse) -> _WireFunctionResponse:
    wire: _WireFunctionResponse = {"name": response.name, "response": dict(response.response)}
    call_id = _provider_id(response.id)
    if call_id is not None:
        wire["id"] = call_id
    return wire


def _parts(parts: Sequence[Part]) -> list[_WirePart]:
    wire_parts: list[_WirePart] = []
    for part in parts:
        wire: _WirePart = {}
        if part.text is not None:
            wire["text"] = part.text
        if part.function_call is not None:
            wire["functionCall"] = _function_call(part.function_call)
        if part.function_response is not None:
            wire["functionResponse"] = _function_response(part.function_response)
        if part.inline_data is not None:
            wire["inlineData"] = {"mimeType": part.inline_data.mime_type, "data": _b64(part.inline_data.data)}
        if not wire and part.thought_signature is None:
            continue  # nothing to send
        if part.thought:
            wire["thought"] = True
        if part.thought_signature is not None:
            wire["thoughtSignature"] = _b64(part.thought_signature)
        wire_parts.append(wire)
    return wire_parts


def _tools(config: GenerateContentConfig, choice: ToolChoice) -> list[_WireTool]:
    offered = {d.name for d in choice.declarations(api_takes_names=True)}
    tools: list[_WireTool] = []
    for tool in config.tools or ():
        wire_tool: _WireTool = {}
        declarations: list[_WireFunctionDeclaration] = []
        for declaration in tool.function_declarations:
            if declaration.name not in offered:
                continue
            wire: _WireFunctionDeclaration = {"name": declaration.name}
            if declaration.description is not None:
                wire["description"] = declaration.description
            if declaration.parameters is not None:
                wire["parametersJsonSchema"] = dict(declaration.parameters)
            declarations.append(wire)
        if declarations:
            wire_tool["functionDeclarations"] = declarations
        if tool.google_search is not None:
            for field in ("exclude_domains", "blocking_confidence"):
                if getattr(tool.google_search, field) is not None:
                    raise _vertex_only(f"google_search.{field}")
            wire_tool["googleSearch"] = tool.google_search.model_dump(mode="json", by_alias=True, exclude_none=True)
        if tool.code_execution is not None:
            wire_tool["codeExecution"] = {}
        if tool.url_context is not None:
            wire_tool["urlContext"] = {}
        for field in ("openai_web_search", "openai_file_search", "anthropic_server_tool"):
            if getattr(tool, field) is not None:
                raise refuse_built_in(field, api="Gemini", provider=_PROVIDER)
        if wire_tool:
            tools.append(wire_tool)
    return tools


def _vertex_only(field: str) -> ConfigurationError:
    """The error for a field the Gemini API does not take (genai refuses the same ones for it)."""
    return ConfigurationError(
        f"{field} is supported on Vertex AI only, not by the Gemini API (send it with extra_body to a server "
        "that takes it)",
        provider=_PROVIDER,
    )


def _safety_settings(config: GenerateContentConfig) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for index, setting in enumerate(config.safety_settings or ()):
        if setting.method is not None:
            raise _vertex_only(f"safety_settings[{index}].method")
        wire.append(setting.model_dump(mode="json", by_alias=True, exclude_none=True))
    return wire


_NAMES_CARRIED: Final = frozenset({FunctionCallingConfigMode.ANY, FunctionCallingConfigMode.VALIDATED})


def _tool_config(config: GenerateContentConfig, choice: ToolChoice) -> _WireToolConfig:
    wire: _WireToolConfig = {}
    if config.tool_config is None:
        return wire
    if choice.parallel is False:
        raise ConfigurationError(
            "parallel_tool_calls=False has no Gemini equivalent (Gemini may always call several functions)",
            provider=_PROVIDER,
        )
    calling: _WireFunctionCallingConfig = {}
    if choice.mode is not None:
        calling["mode"] = choice.mode.value
    if choice.names and choice.mode in _NAMES_CARRIED:
        calling["allowedFunctionNames"] = list(choice.names)
    if choice.stream_arguments is not None:
        raise _vertex_only("function_calling_config.stream_function_call_arguments")
    if calling:
        wire["functionCallingConfig"] = calling
    if config.tool_config.retrieval_config is not None:
        wire["retrievalConfig"] = dict(config.tool_config.retrieval_config)
    if config.tool_config.include_server_side_tool_invocations is not None:
        wire["includeServerSideToolInvocations"] = config.tool_config.include_server_side_tool_invocations
    return wire


_GENERATION_CONFIG_FIELDS: Final[tuple[tuple[ConfigField, str], ...]] = (
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("top_k", "topK"),
    ("max_output_tokens", "maxOutputTokens"),
    ("stop_sequences", "stopSequences"),
    ("candidate_count", "candidateCount"),
    ("seed", "seed"),
    ("response_mime_type", "responseMimeType"),
)


def _generation_config(config: GenerateContentConfig) -> _WireGenerationConfig:
    wire = cast(_WireGenerationConfig, wire_config(config, _GENERATION_CONFIG_FIELDS))
    if config.response_schema is not None:  # JSON Schema (not the OpenAPI subset of responseSchema)
        wire["responseMimeType"] = "application/json"
        wire["responseJsonSchema"] = output_schema(config.response_schema).object_schema()
    thinking = config.thinking_config
    if thinking is not None:
        thinking_wire: _WireThinkingConfig = {}
        if thinking.include_thoughts is not None:
            thinking_wire["includeThoughts"] = thinking.include_thoughts
        if thinking.thinking_budget is not None:
            thinking_wire["thinkingBudget"] = thinking.thinking_budget
        if thinking_wire:
            wire["thinkingConfig"] = thinking_wire
    return wire
