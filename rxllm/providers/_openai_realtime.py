"""OpenAI Realtime: the Realtime WebSocket protocol as a :class:`~rxllm._models.live.LiveProtocol`,
and :class:`OpenAiRealtimeModel`.

The session (as the openai SDK's ``client.realtime.connect`` speaks it):

* The client opens ``{base}/realtime?model=MODEL`` with ``Authorization: Bearer KEY`` and sends
  ``session.update`` (``type: realtime``, ``instructions``, ``tools``, ``output_modalities``,
  ``audio.input.transcription``, ``audio.output.voice``).
* A user turn is ``conversation.item.create`` (an ``input_text`` message) then
  ``response.create``; function results are ``function_call_output`` items then
  ``response.create``; audio is ``input_audio_buffer.append`` (the server's voice-activity
  detection commits it; ``commit`` is sent for a ``Blob`` of no bytes).
* The server answers with ``response.output_text.delta``, ``response.output_audio.delta``,
  ``response.output_audio_transcript.delta`` / ``.done``,
  ``conversation.item.input_audio_transcription.delta`` / ``.completed``,
  ``response.function_call_arguments.delta`` / ``.done``, ``response.done`` (with usage; it ends
  the turn), ``input_audio_buffer.speech_started`` (a barge-in) and ``error`` (the session fails
  with a :class:`~rxllm.ProviderError`). Known events rxllm does not need are skipped; an unknown
  ``type`` is a ``ProtocolError``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, urlsplit, urlunsplit

from .._core.errors import ConfigurationError, MalformedFunctionCallError, ProtocolError, ProviderError
from .._core.redact import register_secrets_of
from .._core.types import Blob, Content, FunctionCall, LlmRequest, UsageMetadata
from .._models.base_llm import BaseLlm
from .._models.live import (
    LiveAudio,
    LiveEvent,
    LiveInterrupted,
    LiveSetupComplete,
    LiveText,
    LiveToolCalls,
    LiveTranscript,
    LiveTurnComplete,
    LiveUsage,
)
from .._models.live_connection import LiveLimits, WebSocketLlmConnection
from .._transports.live_socket import check_live_client, check_live_destination, open_live_socket
from .._transports.websocket import WebSocketConnection, WebSocketLimits
from ._options import resolve_api_key
from ._wire import system_text

__all__ = ["OPENAI_REALTIME_BASE_URL", "OpenAiRealtimeModel", "OpenAiRealtimeProtocol", "openai_realtime_url"]

_PROVIDER: Final = "openai"
OPENAI_REALTIME_BASE_URL: Final = "wss://api.openai.com/v1"
_OFFICIAL_HTTP: Final = "https://api.openai.com/v1"
_MODEL_ROLES: Final = frozenset({"model", "assistant"})
_SKIPPED: Final = frozenset(
    {
        "session.created",
        "session.updated",
        "conversation.created",
        "conversation.item.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.retrieved",
        "conversation.item.truncated",
        "conversation.item.deleted",
        "conversation.item.input_audio_transcription.segment",
        "conversation.item.input_audio_transcription.failed",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.timeout_triggered",
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "output_audio_buffer.cleared",
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.output_audio.done",
        "response.function_call_arguments.delta",
        "rate_limits.updated",
        "transcription_session.created",
        "transcription_session.updated",
    }
)


def openai_realtime_url(base_url: str, model: str) -> str:
    """``{base_url}/realtime?model=MODEL`` with a WebSocket scheme (``http`` → ``ws``, ``https`` → ``wss``)."""
    parts = urlsplit(base_url.strip().rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ConfigurationError(
            f"a realtime base_url needs http(s):// or ws(s):// and a host: {parts.scheme!r}", provider=_PROVIDER
        )
    return urlunsplit((scheme, parts.netloc, f"{parts.path}/realtime", f"model={quote(model, safe='')}", ""))


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class OpenAiRealtimeProtocol:
    """Frames out and events in for one OpenAI Realtime session.

    >>> from rxllm import LlmRequest
    >>> protocol = OpenAiRealtimeProtocol(LlmRequest())
    >>> protocol.opening()
    ['{"type":"session.update","session":{"type":"realtime","output_modalities":["text"]}}']
    >>> protocol.decode('{"type":"response.output_text.delta","delta":"Hi"}')
    [LiveText(text='Hi', thought=False)]
    """

    provider: str = _PROVIDER
    awaits_setup: bool = False

    def __init__(self, llm_request: LlmRequest) -> None:
        self._request = llm_request
        self._calls: list[FunctionCall] = []

    # -- frames out

    def opening(self) -> list[str]:
        request = self._request
        live = request.live_connect_config
        session: dict[str, Any] = {"type": "realtime"}
        instructions = system_text(request)
        if instructions:
            session["instructions"] = instructions
        modalities = [m.lower() for m in (live.response_modalities if live and live.response_modalities else ["TEXT"])]
        session["output_modalities"] = modalities
        tools: list[dict[str, Any]] = [
            {
                "type": "function",
                "name": d.name,
                **({"description": d.description} if d.description else {}),
                "parameters": dict(d.parameters) if d.parameters is not None else {"type": "object", "properties": {}},
            }
            for d in request.config.function_declarations()
        ]
        if tools:
            session["tools"] = tools
        audio: dict[str, Any] = {}
        if live is not None and live.input_audio_transcription is not None:
            transcription = dict(live.input_audio_transcription)
            audio["input"] = {"transcription": {"model": transcription.get("model", "gpt-4o-mini-transcribe")}}
        voice = _voice(live.speech_config if live is not None else None)
        if voice is not None:
            audio["output"] = {"voice": voice}
        if audio:
            session["audio"] = audio
        return [_dumps({"type": "session.update", "session": session})]

    def history(self, contents: Sequence[Content]) -> list[str]:
        frames = [frame for content in contents if content.role != "system" for frame in self._items(content)]
        if frames and contents[-1].role not in _MODEL_ROLES:
            frames.append(_dumps({"type": "response.create"}))
        return frames

    def content(self, content: Content) -> list[str]:
        frames = self._items(content)
        if not frames:
            raise ConfigurationError("send_content needs a content with text or function responses", provider=_PROVIDER)
        return [*frames, _dumps({"type": "response.create"})]

    def _items(self, content: Content) -> list[str]:
        frames: list[str] = []
        text = "".join(p.text for p in content.parts if p.text is not None and not p.thought)
        if text:
            assistant = content.role in _MODEL_ROLES
            frames.append(
                _dumps(
                    {
                        "type": "conversation.item.create",
                        "item": {
                            "type": "message",
                            "role": "assistant" if assistant else "user",
                            "content": [{"type": "output_text" if assistant else "input_text", "text": text}],
                        },
                    }
                )
            )
        for part in content.parts:
            if part.function_call is not None and part.function_call.id:
                call = part.function_call
                frames.append(
                    _dumps(
                        {
                            "type": "conversation.item.create",
                            "item": {"type": "function_call", "call_id": call.id, "name": call.name,
                                     "arguments": json.dumps(dict(call.args))},
                        }
                    )
                )
            if part.function_response is not None:
                response = part.function_response
                if not response.id:
                    raise ConfigurationError(
                        f"a function response for {response.name!r} needs the call's id on OpenAI Realtime",
                        provider=_PROVIDER,
                    )
                frames.append(
                    _dumps(
                        {
                            "type": "conversation.item.create",
                            "item": {"type": "function_call_output", "call_id": response.id,
                                     "output": json.dumps(dict(response.response))},
                        }
                    )
                )
        return frames

    def realtime(self, blob: Blob) -> list[str]:
        if not blob.mime_type.lower().startswith("audio/"):
            raise ConfigurationError(
                f"OpenAI Realtime takes audio realtime input, not {blob.mime_type!r}", provider=_PROVIDER
            )
        if not blob.data:
            return [_dumps({"type": "input_audio_buffer.commit"})]
        return [_dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(blob.data).decode("ascii")})]

    # -- events in

    def decode(self, message: str | bytes) -> list[LiveEvent]:
        if isinstance(message, bytes):
            raise ProtocolError("OpenAI Realtime sent a binary frame; its events are JSON text", provider=_PROVIDER)
        try:
            event = json.loads(message)
        except ValueError as exc:
            raise ProtocolError(f"an OpenAI Realtime event is not JSON: {exc}", provider=_PROVIDER) from exc
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ProtocolError("an OpenAI Realtime event has no type", provider=_PROVIDER)
        kind = event["type"]
        if kind == "session.created":
            return [LiveSetupComplete()]
        if kind in _SKIPPED:
            return []
        if kind == "response.output_text.delta":
            return [LiveText(_string(event, "delta"))]
        if kind == "response.output_audio.delta":
            try:
                data = base64.b64decode(_string(event, "delta"), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ProtocolError(f"an OpenAI Realtime audio delta is not base64: {exc}", provider=_PROVIDER) from exc
            return [LiveAudio(data, "audio/pcm;rate=24000")]
        if kind == "response.output_audio_transcript.delta":
            return [LiveTranscript("output", _string(event, "delta"))]
        if kind == "response.output_audio_transcript.done":
            return [LiveTranscript("output", _string(event, "transcript"), True)]
        if kind == "conversation.item.input_audio_transcription.delta":
            return [LiveTranscript("input", _string(event, "delta"))]
        if kind == "conversation.item.input_audio_transcription.completed":
            return [LiveTranscript("input", _string(event, "transcript"), True)]
        if kind == "response.function_call_arguments.done":
            name, arguments = _string(event, "name"), _string(event, "arguments")
            try:
                args = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                raise MalformedFunctionCallError(name, arguments, str(exc), provider=_PROVIDER) from exc
            if not isinstance(args, dict):
                raise MalformedFunctionCallError(name, arguments, "the arguments are not an object", provider=_PROVIDER)
            self._calls.append(FunctionCall(id=event.get("call_id"), name=name, args=args))
            return []
        if kind == "input_audio_buffer.speech_started":
            return [LiveInterrupted()]
        if kind == "response.done":
            return self._done(event)
        if kind == "error":
            error: dict[str, Any] = event["error"] if isinstance(event.get("error"), dict) else {}
            raise ProviderError(
                str(error.get("message") or "the server reported an error"),
                provider=_PROVIDER,
                code=str(error.get("code") or error.get("type") or "error"),
            )
        raise ProtocolError(f"unknown OpenAI Realtime event type {kind!r}", provider=_PROVIDER)

    def _done(self, event: dict[str, Any]) -> list[LiveEvent]:
        events: list[LiveEvent] = []
        if self._calls:
            events.append(LiveToolCalls(tuple(self._calls)))
            self._calls = []
        response: dict[str, Any] = event["response"] if isinstance(event.get("response"), dict) else {}
        usage = response.get("usage")
        if isinstance(usage, dict):
            events.append(
                LiveUsage(
                    UsageMetadata(
                        prompt_token_count=_int(usage.get("input_tokens")),
                        candidates_token_count=_int(usage.get("output_tokens")),
                        total_token_count=_int(usage.get("total_tokens")),
                    )
                )
            )
        events.append(LiveTurnComplete())
        return events


def _string(event: dict[str, Any], key: str) -> str:
    value = event.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"OpenAI Realtime {event.get('type')} has no string {key!r}", provider=_PROVIDER)
    return value


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _voice(speech: Mapping[str, Any] | None) -> str | None:
    """The voice name of genai's ``speech_config`` (snake_case or camelCase)."""
    if not speech:
        return None
    voice = speech.get("voice_config") or speech.get("voiceConfig") or {}
    prebuilt = voice.get("prebuilt_voice_config") or voice.get("prebuiltVoiceConfig") or {}
    name = prebuilt.get("voice_name") or prebuilt.get("voiceName")
    return str(name) if name else None


class OpenAiRealtimeModel(BaseLlm):
    """An OpenAI Realtime model: live sessions only (``connect``), over
    ``{base_url}/realtime?model=MODEL``, as ADK Java's ``BaseLlm.connect``.

    Args:
        model: the model name, e.g. ``"gpt-realtime"``.
        base_url: the API root, ``wss://`` or ``https://`` (``ws://127.0.0.1:PORT`` for a loopback
            stub).
        api_key: the key, sent as ``Authorization: Bearer``. For the default ``base_url`` it
            defaults to ``OPENAI_API_KEY`` and is required. Never shown in a repr, log or error.
        extra_headers: more headers for the upgrade request.
        http_client: an ``httpx2.Client`` to open sockets through; ``None`` makes one per session.
        limits: the bounds of each session (:class:`~rxllm.LiveLimits`).

    ``generate_content`` refuses (``UnsupportedOperationError``): use
    :class:`~rxllm.providers.openai.OpenAiResponsesModel` for one-shot calls.

    >>> OpenAiRealtimeModel("gpt-realtime", base_url="ws://127.0.0.1:9", api_key="secret")
    OpenAiRealtimeModel(model='gpt-realtime')
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_REALTIME_BASE_URL,
        api_key: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        http_client: object = None,
        limits: LiveLimits | None = None,
    ) -> None:
        super().__init__(model=model)
        official = base_url.strip().rstrip("/") in (OPENAI_REALTIME_BASE_URL, _OFFICIAL_HTTP)
        key = resolve_api_key(
            api_key,
            ("OPENAI_API_KEY",),
            base_url=_OFFICIAL_HTTP if official else base_url,
            official_url=_OFFICIAL_HTTP,
            provider=_PROVIDER,
        )
        check_live_client(http_client, _PROVIDER)
        openai_realtime_url(base_url, model or "x")  # fails now for an unusable base_url
        self._base_url = base_url
        self._headers = dict(extra_headers or {})
        register_secrets_of(self._headers)  # a gateway's token in a header: redacted like the key
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._http_client = http_client
        self._limits = limits or LiveLimits()

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> Any:
        from .._core.errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            f"OpenAiRealtimeModel({self.model!r}) only opens live sessions (connect); "
            "use OpenAiResponsesModel for one-shot calls",
            provider=_PROVIDER,
        )

    def connect(self, llm_request: LlmRequest) -> WebSocketLlmConnection:
        """Open a Realtime session (``docs/live.md``). Returns at once; the socket opens in the
        background and a failure to open reaches ``receive()`` and the sends."""
        model = (llm_request.model or self.model).strip()
        if not model:
            raise ConfigurationError("a model name is required for an OpenAI Realtime session", provider=_PROVIDER)
        url = openai_realtime_url(self._base_url, model)
        headers, http_client, limits = dict(self._headers), self._http_client, self._limits
        check_live_destination(url, headers, _PROVIDER)

        def opener(ws_limits: WebSocketLimits) -> tuple[WebSocketConnection, Callable[[], None]]:
            return open_live_socket(
                http_client, url, headers=headers, limits=ws_limits, provider=_PROVIDER,
                connect_timeout=limits.setup_timeout,
            )

        declared = [d.name for d in llm_request.config.function_declarations()]
        return WebSocketLlmConnection(
            opener, OpenAiRealtimeProtocol(llm_request), declared=declared, limits=limits,
            description=f"model={model!r}, ",
        )
