"""A loopback live (BIDI) server per protocol that plays a scripted session: Gemini Live's
BidiGenerateContent and OpenAI's Realtime API.

:class:`LiveStubServer` listens on ``ws://127.0.0.1:PORT``; each connection plays the next
script (a list of steps), records every message the client sent (parsed JSON) and how the
client closed, and can drop the connection at any step::

    from rxllm.testing import LiveStubServer, Reply, Expect, gemini

    script = [Expect("setup"), Reply(gemini.setup_complete()), Expect("clientContent"),
              Reply(gemini.text("Hi")), Reply(gemini.turn_complete())]
    with LiveStubServer("gemini", [script]) as server:
        model = GeminiModel("gemini-live-2.5-flash", base_url=server.url, api_key="k")
        ...
        record = server.connection(0)
        record.messages          # what the client sent, in order
        record.wait_closed()     # the client's close frame (or the end of the connection) arrived

Steps: :class:`Expect` reads client messages until one of a kind (Gemini: the message's top-level
key, ``"setup"``; OpenAI: its ``"type"``, ``"session.update"``); :class:`Reply` sends a message
(a dict as JSON text, ``str`` as text, ``bytes`` as a binary frame); :class:`Drop` ends the TCP
connection without a close frame; :class:`CloseWith` sends a close frame; :class:`Oversized`
sends a frame of that many bytes. After the last step the connection answers nothing further
(``echo=True``: every realtime audio frame comes back as one audio delta of the same bytes) and
reads until the client closes. The message builders of :data:`gemini` and :data:`openai` write
each protocol's server messages.

The official clients speak to it too (``tests/live/test_official_clients.py`` drives
google-genai's ``client.aio.live.connect`` and the openai SDK's realtime client against it).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace, TracebackType
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from .._core.redact import redact_url
from .._transports.ws_server import PeerClosedError, Refusal, ServerPeer, WebSocketServer

__all__ = [
    "CloseWith",
    "Drop",
    "Expect",
    "LiveConnectionRecord",
    "LiveStep",
    "LiveStubServer",
    "Oversized",
    "Reply",
    "gemini",
    "openai",
]

LiveProtocolName = Literal["gemini", "openai"]
_TIMEOUT = 10.0  # a safety net for a test's waits; nothing in a passing run waits for it


@dataclass(frozen=True)
class Expect:
    """Read client messages until one of ``kind`` (every one is recorded)."""

    kind: str


@dataclass(frozen=True)
class Reply:
    """Send ``message``: a dict as JSON text (``binary=True``: as a binary frame), ``str`` as a
    text frame, ``bytes`` as a binary frame."""

    message: dict[str, Any] | str | bytes
    binary: bool = False


@dataclass(frozen=True)
class Drop:
    """End the TCP connection without a close frame."""


@dataclass(frozen=True)
class CloseWith:
    """Send a close frame with ``code`` and ``reason``, then read until the client answers."""

    code: int = 1000
    reason: str = ""


@dataclass(frozen=True)
class Oversized:
    """Send one text frame of ``size`` bytes (larger than a client accepts)."""

    size: int


LiveStep = Expect | Reply | Drop | CloseWith | Oversized


@dataclass
class LiveConnectionRecord:
    """One connection: its upgrade request, what the client sent, how it ended.

    Attributes:
        path: the upgrade request's path.
        query: its query parameters (tests check that no credential travels there).
        headers: its headers, names lower-cased.
        messages: every client message in order, parsed JSON (a non-JSON message as it came).
        close_code: the client's close code; ``None`` while open or when it ended without one.
        closed_at: ``time.monotonic()`` when the client's close (or the connection's end) reached
            the server; ``None`` while open.
    """

    path: str
    query: dict[str, str]
    headers: dict[str, str]
    messages: list[Any] = field(default_factory=list)
    close_code: int | None = None
    closed_at: float | None = None
    _closed: threading.Event = field(default_factory=threading.Event, repr=False)
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    @property
    def target(self) -> str:
        """The path and query with secrets shown as ``***``."""
        query = "&".join(f"{k}={v}" for k, v in self.query.items())
        return redact_url(f"{self.path}?{query}" if query else self.path)

    def wait_closed(self, timeout: float = _TIMEOUT) -> bool:
        """Wait until the client's close frame or the end of the connection reached the server."""
        return self._closed.wait(timeout)

    @property
    def closed(self) -> bool:
        """Whether the client's close (or the end of the connection) reached the server."""
        return self._closed.is_set()

    def wait_messages(self, count: int, timeout: float = _TIMEOUT) -> list[Any]:
        """Wait until the client sent ``count`` messages (or closed); the messages so far."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.messages) >= count or self._closed.is_set(), timeout)
            return list(self.messages)

    def of_kind(self, kind: str) -> list[Any]:
        """The client messages of ``kind`` (Gemini's top-level key in camelCase, OpenAI's ``type``)."""
        return [m for m in self.messages if _kind(m) == kind]

    def _add(self, message: Any) -> None:
        with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    def _end(self, code: int | None) -> None:
        with self._changed:
            if self.closed_at is None:
                self.closed_at = time.monotonic()
            self.close_code = code
            self._closed.set()
            self._changed.notify_all()


def _kind(message: Any) -> str | None:
    """OpenAI's ``type``; else Gemini's top-level key in camelCase (the API, like protobuf's JSON,
    takes ``client_content`` as well as ``clientContent``; google-genai sends the former)."""
    if not isinstance(message, dict):
        return None
    if isinstance(message.get("type"), str):
        return str(message["type"])
    key = next(iter(message), None)
    return None if key is None else re.sub(r"_([a-z])", lambda m: m.group(1).upper(), str(key))


class LiveStubServer:
    """A loopback live server (module docstring); a context manager.

    Args:
        protocol: ``"gemini"`` or ``"openai"``.
        scripts: one list of steps per connection, in order; a connection beyond them plays
            an empty script.
        echo: after the script, answer each realtime audio frame with an audio delta of the
            same bytes.
        api_key: when given, the upgrade is refused (401, the service's error JSON) unless it
            carries this key where the service reads it (Gemini: the ``x-goog-api-key`` header;
            OpenAI: ``Authorization: Bearer``) and its URL carries no credential (``key=`` or
            ``access_token=``).

    Attributes:
        url: ``ws://127.0.0.1:PORT`` (a model's ``base_url``).
        connections: the records, in the order the connections came.
    """

    def __init__(
        self,
        protocol: LiveProtocolName,
        scripts: Sequence[Sequence[LiveStep]] = (),
        *,
        echo: bool = False,
        api_key: str | None = None,
    ) -> None:
        if protocol not in ("gemini", "openai"):
            raise ValueError(f"protocol must be 'gemini' or 'openai', not {protocol!r}")
        self.protocol = protocol
        self._scripts = [list(s) for s in scripts]
        self._echo = echo
        self._api_key = api_key
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.connections: list[LiveConnectionRecord] = []
        self._server = WebSocketServer(self._handle, refuse=None if api_key is None else self._check_key)
        self.url = self._server.url

    def __enter__(self) -> LiveStubServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """End every connection; raise what a script step raised."""
        self._server.close()
        if self._server.errors:
            raise self._server.errors[0]

    def connection(self, index: int, timeout: float = _TIMEOUT) -> LiveConnectionRecord:
        """The record of connection ``index`` (waits for it to arrive)."""
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.connections) > index, timeout)
            return self.connections[index]

    def _check_key(self, request: Any) -> Refusal | None:  # wsproto's Request (only the transports import wsproto)
        """The upgrade refused unless it carries :attr:`_api_key` as the service reads it, and
        no credential in its URL."""
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.extra_headers}
        query = dict(parse_qsl(urlsplit(request.target).query))
        if self.protocol == "gemini":
            sent = headers.get("x-goog-api-key")
        else:
            sent = headers.get("authorization", "").removeprefix("Bearer ") or None
        if sent == self._api_key and not {"key", "access_token"} & query.keys():
            return None
        body = {"error": {"code": 401, "message": "API key not valid. Please pass a valid API key.",
                          "status": "UNAUTHENTICATED"}}
        return Refusal(401, json.dumps(body).encode(), [(b"content-type", b"application/json")])

    def _handle(self, peer: ServerPeer) -> None:
        record = LiveConnectionRecord(peer.path, dict(peer.query), dict(peer.headers))
        with self._arrived:
            index = len(self.connections)
            self.connections.append(record)
            self._arrived.notify_all()
            script = self._scripts[index] if index < len(self._scripts) else []
        try:
            for step in script:
                if not self._play(peer, record, step):
                    return
            while True:
                message = self._read(peer, record)
                if self._echo:
                    self._echo_back(peer, message)
        except PeerClosedError as closed:
            record._end(closed.code)
        finally:
            record._end(record.close_code if record.closed else peer.close_code)

    def _read(self, peer: ServerPeer, record: LiveConnectionRecord) -> Any:
        raw = peer.recv()
        try:
            message = json.loads(raw)
        except ValueError:
            message = raw
        record._add(message)
        return message

    def _play(self, peer: ServerPeer, record: LiveConnectionRecord, step: LiveStep) -> bool:
        if isinstance(step, Expect):
            while _kind(self._read(peer, record)) != step.kind:
                pass
        elif isinstance(step, Reply):
            message = step.message
            if isinstance(message, dict):
                text = json.dumps(message)
                peer.send_bytes(text.encode()) if step.binary else peer.send_text(text)
            elif isinstance(message, str):
                peer.send_text(message)
            else:
                peer.send_bytes(message)
        elif isinstance(step, Drop):
            peer.drop()
            record._end(None)
            return False
        elif isinstance(step, CloseWith):
            peer.close(step.code, step.reason)
        else:
            peer.send_oversized(step.size)
        return True

    def _echo_back(self, peer: ServerPeer, message: Any) -> None:
        if self.protocol == "gemini":
            audio = message.get("realtimeInput", {}).get("audio") if isinstance(message, dict) else None
            if audio is not None:
                peer.send_text(json.dumps(gemini.audio(base64.b64decode(audio["data"]), audio["mimeType"])))
        elif isinstance(message, dict) and message.get("type") == "input_audio_buffer.append":
            peer.send_text(json.dumps(openai.audio(base64.b64decode(message["audio"]))))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _gemini_usage(prompt: int, response: int) -> dict[str, Any]:
    return {"usageMetadata": {"promptTokenCount": prompt, "responseTokenCount": response,
                              "totalTokenCount": prompt + response}}


gemini = SimpleNamespace(
    setup_complete=lambda: {"setupComplete": {}},
    text=lambda text: {"serverContent": {"modelTurn": {"parts": [{"text": text}]}}},
    audio=lambda data, mime_type="audio/pcm;rate=24000": {
        "serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": mime_type, "data": _b64(data)}}]}}
    },
    input_transcription=lambda text: {"serverContent": {"inputTranscription": {"text": text}}},
    output_transcription=lambda text: {"serverContent": {"outputTranscription": {"text": text}}},
    interrupted=lambda: {"serverContent": {"interrupted": True}},
    turn_complete=lambda prompt=None, response=None: {
        "serverContent": {"turnComplete": True},
        **(_gemini_usage(prompt, response or 0) if prompt is not None else {}),
    },
    tool_call=lambda *calls: {
        "toolCall": {"functionCalls": [{"id": i, "name": n, "args": a} for i, n, a in calls]}
    },
    tool_call_cancellation=lambda *ids: {"toolCallCancellation": {"ids": list(ids)}},
    go_away=lambda time_left="10s": {"goAway": {"timeLeft": time_left}},
    resumption=lambda handle, resumable=True: {
        "sessionResumptionUpdate": {"newHandle": handle, "resumable": resumable}
    },
)
"""Gemini Live server messages: ``setup_complete()``, ``text(t)``, ``audio(data, mime_type)``,
``input_transcription(t)``, ``output_transcription(t)``, ``interrupted()``,
``turn_complete(prompt=, response=)`` (with usage when given), ``tool_call((id, name, args), ...)``,
``tool_call_cancellation(*ids)``, ``go_away(time_left)``, ``resumption(handle)``."""


openai = SimpleNamespace(
    session_created=lambda: {"type": "session.created", "event_id": "evt_1",
                             "session": {"type": "realtime", "id": "sess_1", "object": "realtime.session"}},
    session_updated=lambda: {"type": "session.updated", "event_id": "evt_2",
                             "session": {"type": "realtime", "id": "sess_1", "object": "realtime.session"}},
    response_created=lambda response_id="resp_1": {
        "type": "response.created", "event_id": "evt_3",
        "response": {"id": response_id, "object": "realtime.response", "status": "in_progress", "output": []},
    },
    text=lambda text, response_id="resp_1": {
        "type": "response.output_text.delta", "event_id": "evt_t", "response_id": response_id, "item_id": "item_1",
        "output_index": 0, "content_index": 0, "delta": text,
    },
    audio=lambda data, response_id="resp_1": {
        "type": "response.output_audio.delta", "event_id": "evt_a", "response_id": response_id, "item_id": "item_1",
        "output_index": 0, "content_index": 0, "delta": _b64(data),
    },
    output_transcript=lambda text, response_id="resp_1": {
        "type": "response.output_audio_transcript.delta", "event_id": "evt_o", "response_id": response_id,
        "item_id": "item_1", "output_index": 0, "content_index": 0, "delta": text,
    },
    output_transcript_done=lambda text, response_id="resp_1": {
        "type": "response.output_audio_transcript.done", "event_id": "evt_od", "response_id": response_id,
        "item_id": "item_1", "output_index": 0, "content_index": 0, "transcript": text,
    },
    input_transcript=lambda text: {
        "type": "conversation.item.input_audio_transcription.delta", "event_id": "evt_i", "item_id": "item_0",
        "content_index": 0, "delta": text,
    },
    input_transcript_done=lambda text: {
        "type": "conversation.item.input_audio_transcription.completed", "event_id": "evt_ic", "item_id": "item_0",
        "content_index": 0, "transcript": text,
    },
    speech_started=lambda: {"type": "input_audio_buffer.speech_started", "event_id": "evt_s",
                            "audio_start_ms": 0, "item_id": "item_0"},
    call_arguments=lambda call_id, delta, response_id="resp_1": {
        "type": "response.function_call_arguments.delta", "event_id": "evt_fd", "response_id": response_id,
        "item_id": "item_f", "output_index": 0, "call_id": call_id, "delta": delta,
    },
    call_done=lambda call_id, name, arguments, response_id="resp_1": {
        "type": "response.function_call_arguments.done", "event_id": "evt_fc", "response_id": response_id,
        "item_id": "item_f", "output_index": 0, "call_id": call_id, "name": name, "arguments": arguments,
    },
    response_done=lambda status="completed", input_tokens=None, output_tokens=None, response_id="resp_1": {
        "type": "response.done", "event_id": "evt_d",
        "response": {
            "id": response_id, "object": "realtime.response", "status": status, "output": [],
            **({"usage": {"input_tokens": input_tokens, "output_tokens": output_tokens or 0,
                          "total_tokens": input_tokens + (output_tokens or 0)}} if input_tokens is not None else {}),
        },
    },
    error=lambda message, code="invalid_request_error": {
        "type": "error", "event_id": "evt_e", "error": {"type": code, "code": code, "message": message}
    },
)
"""OpenAI Realtime server events: ``session_created()``, ``session_updated()``,
``response_created()``, ``text(t)``, ``audio(data)``, ``output_transcript(t)``,
``output_transcript_done(t)``, ``input_transcript(t)``, ``input_transcript_done(t)``,
``speech_started()``, ``call_arguments(call_id, delta)``, ``call_done(call_id, name, arguments)``,
``response_done(status, input_tokens=, output_tokens=)``, ``error(message)``."""
