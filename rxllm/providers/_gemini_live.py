"""Gemini Live: the BidiGenerateContent WebSocket protocol as a :class:`~rxllm._models.live.LiveProtocol`.

The session (as google-genai's ``client.aio.live.connect`` and ADK Java's ``GeminiLlmConnection``
speak it):

* The client opens ``{base}/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent``
  with the API key in the upgrade request's ``x-goog-api-key`` header, as google-genai does (an
  ephemeral token, ``auth_tokens/...``, goes to ``BidiGenerateContentConstrained`` on ``v1alpha``
  as ``Authorization: Token ...``). The URL carries no credential; the key is registered for
  redaction, so no repr, log line or error shows it.
* Its first message is ``{"setup": {...}}``: the model, ``generationConfig`` (with
  ``responseModalities`` and ``speechConfig``), ``systemInstruction``, ``tools``,
  ``safetySettings``, ``inputAudioTranscription`` / ``outputAudioTranscription``,
  ``sessionResumption``, ``realtimeInputConfig``. The setup has no ``toolConfig``: the request's
  ``tool_config`` is applied to the declarations sent (allowed names with ``AUTO`` keep only those;
  ``NONE`` sends none), and what the setup cannot carry (``ANY``/``VALIDATED``, a retrieval
  config...) is refused by ``connect``. The server answers ``{"setupComplete": {}}``; nothing else is sent
  before.
* Then ``clientContent`` (turns; ``turnComplete``), ``realtimeInput`` (``audio`` / ``video`` /
  ``text``) and ``toolResponse`` (``functionResponses``) from the client; ``serverContent``
  (``modelTurn`` parts, ``inputTranscription``, ``outputTranscription``, ``interrupted``,
  ``turnComplete``), ``toolCall``, ``toolCallCancellation``, ``usageMetadata``, ``goAway`` and
  ``sessionResumptionUpdate`` from the server. The server sends its JSON in text or binary frames.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from .._core.errors import ConfigurationError, ProtocolError
from .._core.genai_types import FunctionCallingConfigMode, LiveServerSessionResumptionUpdate
from .._core.redact import register_secret, register_secrets_of
from .._core.types import Blob, Content, FunctionCall, GenerateContentConfig, LlmRequest, UsageMetadata
from .._models.live import (
    LiveAudio,
    LiveEvent,
    LiveGoAway,
    LiveInterrupted,
    LiveResumption,
    LiveSetupComplete,
    LiveText,
    LiveToolCalls,
    LiveToolCancellation,
    LiveTranscript,
    LiveTurnComplete,
    LiveUsage,
)
from .._models.live_connection import LiveLimits, WebSocketLlmConnection
from .._transports.live_socket import check_live_client, check_live_destination, open_live_socket
from .._transports.websocket import WebSocketConnection, WebSocketLimits
from ._gemini import _MODEL_ROLES, _generation_config, _parts, _safety_settings, _tools
from ._wire import ToolChoice, tool_choice

__all__ = ["GeminiLiveProtocol", "camel_keys", "connect_gemini_live", "gemini_live_headers", "gemini_live_url"]

_PROVIDER: Final = "gemini"
_SERVER_KEYS: Final = frozenset(
    {
        "setupComplete",
        "serverContent",
        "toolCall",
        "toolCallCancellation",
        "usageMetadata",
        "goAway",
        "sessionResumptionUpdate",
        "voiceActivity",
        "voiceActivityDetectionSignal",
    }
)


def gemini_live_url(base_url: str, api_version: str, api_key: str | None) -> str:
    """The BidiGenerateContent WebSocket URL of ``base_url`` (``http`` → ``ws``, ``https`` → ``wss``).

    It carries no credential (see :func:`gemini_live_headers`); an ephemeral token
    (``auth_tokens/...``) selects the constrained method on ``v1alpha``.
    """
    parts = urlsplit(base_url.strip().rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ConfigurationError(f"a live base_url needs http(s):// or ws(s):// and a host: {parts.scheme!r}",
                                 provider=_PROVIDER)
    method, version = "BidiGenerateContent", api_version
    if api_key is not None and api_key.startswith("auth_tokens/"):
        method, version = "BidiGenerateContentConstrained", "v1alpha"
    path = f"{parts.path}/ws/google.ai.generativelanguage.{version}.GenerativeService.{method}"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def gemini_live_headers(api_key: str | None, extra_headers: Mapping[str, str] | None) -> dict[str, str]:
    """The upgrade request's headers: the credential as google-genai sends it (``x-goog-api-key``;
    ``Authorization: Token ...`` for an ephemeral token), then ``extra_headers`` (a header of the
    same name, in any case, replaces it).

    >>> gemini_live_headers("k-1", {"X-Trace": "1"})
    {'x-goog-api-key': 'k-1', 'X-Trace': '1'}
    >>> gemini_live_headers("auth_tokens/abc", None)
    {'authorization': 'Token auth_tokens/abc'}
    """
    headers: dict[str, str] = {}
    if api_key is not None and api_key.startswith("auth_tokens/"):
        headers["authorization"] = f"Token {api_key}"
    elif api_key is not None:
        headers["x-goog-api-key"] = api_key
    if extra_headers:
        replaced = {name.lower() for name in extra_headers}
        headers = {name: value for name, value in headers.items() if name not in replaced}
        headers.update(extra_headers)
    return headers


_CAMEL = re.compile(r"_([a-z0-9])")


def camel_keys(value: Any) -> Any:
    """``value`` with every object key in camelCase (genai's snake_case options on the wire)."""
    if isinstance(value, Mapping):
        return {_CAMEL.sub(lambda m: m.group(1).upper(), str(k)): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [camel_keys(v) for v in value]
    return value


def _model_name(model: str) -> str:
    name = model.strip()
    if not name:
        raise ConfigurationError("a model name is required for a Gemini live session", provider=_PROVIDER)
    return name if name.startswith(("models/", "tunedModels/")) else "models/" + name


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class GeminiLiveProtocol:
    """Frames out and events in for one Gemini Live session.

    >>> from rxllm import LlmRequest
    >>> protocol = GeminiLiveProtocol(LlmRequest(), model="gemini-live-2.5-flash")
    >>> protocol.opening()
    ['{"setup":{"model":"models/gemini-live-2.5-flash","generationConfig":{"responseModalities":["TEXT"]}}}']
    >>> protocol.decode('{"serverContent":{"modelTurn":{"parts":[{"text":"Hi"}]}}}')
    [LiveText(text='Hi', thought=False)]
    """

    provider: str = _PROVIDER
    awaits_setup: bool = True

    def __init__(self, llm_request: LlmRequest, *, model: str) -> None:
        self._request = llm_request
        self._model = _model_name(llm_request.model or model)
        self._opening = [_dumps({"setup": self._setup()})]  # built here: a config it cannot carry fails connect()

    @property
    def model(self) -> str:
        """The model's resource name (``models/...``)."""
        return self._model

    # -- frames out

    def opening(self) -> list[str]:
        return list(self._opening)

    def _setup(self) -> dict[str, Any]:
        request = self._request
        config = request.config
        live = request.live_connect_config
        setup: dict[str, Any] = {"model": self._model}
        generation: dict[str, Any] = dict(_generation_config(config))
        generation["responseModalities"] = list(live.response_modalities) if live and live.response_modalities else [
            "TEXT"
        ]
        if live is not None and live.speech_config is not None:
            generation["speechConfig"] = camel_keys(live.speech_config)
        setup["generationConfig"] = generation
        system_parts = _parts(config.system_instruction.parts) if config.system_instruction is not None else []
        for content in request.contents:
            if content.role == "system":
                system_parts.extend(_parts(content.parts))
        if system_parts:
            setup["systemInstruction"] = {"parts": system_parts}
        choice = tool_choice(config, provider=_PROVIDER)
        tools = _live_tools(_tools(config, choice), choice, config)
        if tools:
            setup["tools"] = tools
        if config.safety_settings:
            setup["safetySettings"] = _safety_settings(config)
        if live is not None:
            for field, wire in (
                ("input_audio_transcription", "inputAudioTranscription"),
                ("output_audio_transcription", "outputAudioTranscription"),
                ("session_resumption", "sessionResumption"),
                ("realtime_input_config", "realtimeInputConfig"),
            ):
                value = getattr(live, field)
                if value is not None:
                    setup[wire] = camel_keys(value)
        return setup

    def history(self, contents: Sequence[Content]) -> list[str]:
        turns = [_content(c) for c in contents if c.role != "system" and _parts(c.parts)]
        if not turns:
            return []
        last = contents[-1]
        return [_dumps({"clientContent": {"turns": turns, "turnComplete": last.role not in _MODEL_ROLES}})]

    def content(self, content: Content) -> list[str]:
        responses = [p.function_response for p in content.parts if p.function_response is not None]
        if responses:
            wire = []
            for response in responses:
                item: dict[str, Any] = {"name": response.name, "response": dict(response.response)}
                if response.id:
                    item["id"] = response.id
                wire.append(item)
            return [_dumps({"toolResponse": {"functionResponses": wire}})]
        if not _parts(content.parts):
            raise ConfigurationError("send_content needs a content with at least one part", provider=_PROVIDER)
        return [_dumps({"clientContent": {"turns": [_content(content)], "turnComplete": True}})]

    def realtime(self, blob: Blob) -> list[str]:
        mime = blob.mime_type.lower()
        if mime.startswith("audio/"):
            return [_dumps({"realtimeInput": {"audio": {"mimeType": blob.mime_type, "data": _b64(blob.data)}}})]
        if mime.startswith(("image/", "video/")):
            return [_dumps({"realtimeInput": {"video": {"mimeType": blob.mime_type, "data": _b64(blob.data)}}})]
        if mime.startswith("text/"):
            return [_dumps({"realtimeInput": {"text": blob.data.decode("utf-8", "replace")}})]
        raise ConfigurationError(
            f"Gemini Live takes audio/*, image/*, video/* or text/* realtime input, not {blob.mime_type!r}",
            provider=_PROVIDER,
        )

    # -- events in

    def decode(self, message: str | bytes) -> list[LiveEvent]:
        payload = _loads(message)
        if not payload.keys() & _SERVER_KEYS:
            raise ProtocolError(
                f"unknown Gemini Live message with keys {sorted(payload)[:5]}", provider=_PROVIDER
            )
        events: list[LiveEvent] = []
        if "setupComplete" in payload:
            events.append(LiveSetupComplete())
        content = payload.get("serverContent")
        if content is not None:
            events.extend(self._server_content(_object(content, "serverContent")))
        call = payload.get("toolCall")
        if call is not None:
            events.append(LiveToolCalls(tuple(_calls(_object(call, "toolCall")))))
        cancellation = payload.get("toolCallCancellation")
        if cancellation is not None:
            ids = _object(cancellation, "toolCallCancellation").get("ids") or []
            events.append(LiveToolCancellation(tuple(str(i) for i in _list(ids, "toolCallCancellation.ids"))))
        resumption = payload.get("sessionResumptionUpdate")
        if resumption is not None:
            try:
                wire = _object(resumption, "sessionResumptionUpdate")
                update = LiveServerSessionResumptionUpdate.model_validate(wire)
            except ValueError as exc:
                raise ProtocolError(f"sessionResumptionUpdate is not readable: {exc}", provider=_PROVIDER) from exc
            events.append(LiveResumption(update))
        away = payload.get("goAway")
        if away is not None:
            left = _object(away, "goAway").get("timeLeft")
            events.append(LiveGoAway(None if left is None else str(left)))
        usage = payload.get("usageMetadata")
        if usage is not None:
            events.append(LiveUsage(_usage(_object(usage, "usageMetadata"))))
        if content is not None and content.get("turnComplete"):
            events.append(LiveTurnComplete())  # after the message's usage: the turn's usage rides on it
        return events

    def _server_content(self, content: dict[str, Any]) -> list[LiveEvent]:
        events: list[LiveEvent] = []
        for direction, key in (("input", "inputTranscription"), ("output", "outputTranscription")):
            if key in content:
                transcription = _object(content[key], key)
                text = transcription.get("text")
                finished = bool(transcription.get("finished"))
                if text is not None or finished:
                    events.append(
                        LiveTranscript(direction, None if text is None else str(text), False)  # type: ignore[arg-type]
                    )
                    if finished:
                        events.append(LiveTranscript(direction, None, True))  # type: ignore[arg-type]
        turn = content.get("modelTurn")
        if turn is not None:
            for part in _list(_object(turn, "modelTurn").get("parts") or [], "modelTurn.parts"):
                part = _object(part, "modelTurn.parts[]")
                if isinstance(part.get("text"), str):
                    events.append(LiveText(part["text"], bool(part.get("thought"))))
                inline = part.get("inlineData")
                if inline is not None:
                    inline = _object(inline, "inlineData")
                    events.append(LiveAudio(_unb64(inline.get("data", "")), str(inline.get("mimeType", ""))))
        if content.get("interrupted"):
            events.append(LiveInterrupted())
        return events


def _live_tools(tools: list[Any], choice: ToolChoice, config: GenerateContentConfig) -> list[Any]:
    """The setup's ``tools`` under the request's ``tool_config``, which BidiGenerateContentSetup has
    no field for (neither has google-genai's ``LiveConnectConfig``): ``AUTO`` with allowed names
    already sent only those (``_tools``); ``NONE`` sends no function declarations, so none can be
    called. Anything else would be dropped without a word, so it is refused.

    Raises:
        ConfigurationError: ``tool_config`` asks for what a live session cannot carry.
    """
    tool_config = config.tool_config
    if tool_config is None:
        return tools
    unsupported = [
        name
        for name, present in (
            (f"function_calling_config.mode={choice.mode.value if choice.mode else ''}",
             choice.mode in (FunctionCallingConfigMode.ANY, FunctionCallingConfigMode.VALIDATED)),
            ("parallel_tool_calls", choice.parallel is not None),
            ("stream_function_call_arguments", choice.stream_arguments is not None),
            ("retrieval_config", tool_config.retrieval_config is not None),
            ("include_server_side_tool_invocations", tool_config.include_server_side_tool_invocations is not None),
        )
        if present
    ]
    if unsupported:
        raise ConfigurationError(
            f"tool_config.{unsupported[0]} cannot be sent to Gemini Live (its setup message has no toolConfig; "
            "only mode AUTO, with or without allowed_function_names, and NONE are applied, to the declarations sent)",
            provider=_PROVIDER,
        )
    if choice.mode is FunctionCallingConfigMode.NONE:
        stripped = [{k: v for k, v in tool.items() if k != "functionDeclarations"} for tool in tools]
        return [tool for tool in stripped if tool]
    return tools


def _content(content: Content) -> dict[str, Any]:
    return {"role": "model" if content.role in _MODEL_ROLES else "user", "parts": _parts(content.parts)}


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(message: str | bytes) -> dict[str, Any]:
    try:
        payload = json.loads(message)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "binary" if isinstance(message, bytes) else "text"
        raise ProtocolError(f"a Gemini Live {kind} message is not JSON: {exc}", provider=_PROVIDER) from exc
    if not isinstance(payload, dict):
        raise ProtocolError(f"a Gemini Live message is {type(payload).__name__}, not an object", provider=_PROVIDER)
    return payload


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"Gemini Live {where} is {type(value).__name__}, not an object", provider=_PROVIDER)
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"Gemini Live {where} is {type(value).__name__}, not a list", provider=_PROVIDER)
    return value


def _unb64(value: object) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"Gemini Live inline data is not base64: {exc}", provider=_PROVIDER) from exc


def _calls(call: dict[str, Any]) -> list[FunctionCall]:
    calls = []
    for item in _list(call.get("functionCalls") or [], "toolCall.functionCalls"):
        item = _object(item, "toolCall.functionCalls[]")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise ProtocolError("a Gemini Live function call has no name", provider=_PROVIDER)
        args = item.get("args") or {}
        calls.append(FunctionCall(id=item.get("id"), name=name, args=_object(args, f"the args of {name!r}")))
    return calls


def _usage(usage: dict[str, Any]) -> UsageMetadata:
    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) else None

    return UsageMetadata(
        prompt_token_count=count("promptTokenCount"),
        candidates_token_count=count("responseTokenCount") or count("candidatesTokenCount"),
        total_token_count=count("totalTokenCount"),
        thoughts_token_count=count("thoughtsTokenCount"),
        cached_content_token_count=count("cachedContentTokenCount"),
    )


def connect_gemini_live(
    llm_request: LlmRequest,
    *,
    model: str,
    base_url: str,
    api_version: str,
    api_key: str | None,
    extra_headers: Mapping[str, str] | None,
    http_client: object,
    limits: LiveLimits | None,
    allow_insecure_key: bool = False,
) -> WebSocketLlmConnection:
    """A Gemini Live session for ``llm_request`` (``GeminiModel.connect``): returns at once, the
    socket opens on the session's writer thread."""
    check_live_client(http_client, _PROVIDER)
    protocol = GeminiLiveProtocol(llm_request, model=model)
    url = gemini_live_url(base_url, api_version, api_key)
    headers = gemini_live_headers(api_key, extra_headers)
    register_secret(api_key)  # redacted everywhere, whichever header carries it (the model registered it)
    register_secrets_of(headers)
    limits = limits or LiveLimits()
    if not allow_insecure_key:
        check_live_destination(url, headers, _PROVIDER)

    def opener(ws_limits: WebSocketLimits) -> tuple[WebSocketConnection, Callable[[], None]]:
        return open_live_socket(
            http_client, url, headers=headers, limits=ws_limits, provider=_PROVIDER,
            connect_timeout=limits.setup_timeout,
        )

    declared = [d.name for d in llm_request.config.function_declarations()]
    return WebSocketLlmConnection(
        opener, protocol, declared=declared, limits=limits, description=f"model={protocol.model!r}, "
    )
