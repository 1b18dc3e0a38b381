"""Shared helpers of the fault suite: bounded waits, an emission recorder, fault-ready wire bodies.

Every wait here has a timeout; nothing sleeps for synchronisation. The wire bodies are the
public :func:`rxllm.testing.sse_turn` streams re-encoded with raw UTF-8 (``sse_turn`` escapes
non-ASCII as ``\\uXXXX``), so a cut can fall inside a multi-byte character.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.scheduler import ThreadPoolScheduler

from rxllm import AsyncHttpTransport, Content, HttpTransport, LlmRequest, LlmResponse, Part
from rxllm.testing import Disconnect, StubResponse, ToolCallScript, sse_turn

TIMEOUT = 5.0
"""The bound on every single wait of the suite (seconds)."""

REQUEST = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("Wie ist das Wetter in Köln?"),)),))

TEXT_PIECES = ("Grüße aus ", "Köln — ", "日本語で ", "天気 🌦️ ", "gleich.")
"""Answer text with 2-, 3- and 4-byte UTF-8 characters."""

TOOL_CALL = ToolCallScript(
    "call_wx1",
    "get_weather",
    ['{"city": "Kö', 'ln", "note": "naïve 🎉 ', '日本", "days": [1, 2, {"deep": tr', "ue}]}"],
)
"""A tool call whose JSON arguments arrive in pieces that split values (and hold multi-byte text)."""


def utf8_events(events: Sequence[bytes]) -> list[bytes]:
    """The same SSE events with every ``data:`` JSON re-encoded as raw UTF-8 (``ensure_ascii=False``)."""
    out: list[bytes] = []
    for event in events:
        text = event.decode("ascii")
        line_end = "\r\n" if "\r\n" in text else "\n"
        lines = []
        for line in text.split(line_end):
            if line.startswith("data: ") and line[6:7] in "{[":
                try:
                    payload = json.loads(line[6:])
                except ValueError:
                    lines.append(line)
                    continue
                line = "data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
            lines.append(line)
        out.append(line_end.join(lines).encode("utf-8"))
    return out


@dataclass(frozen=True)
class FaultBody:
    """One provider's full turn body and the offsets that matter for a cut.

    Attributes:
        protocol: the wire protocol (``"openai-chat"``, ``"anthropic"``, ``"gemini"``).
        events: the SSE events, one ``bytes`` each.
        body: ``b"".join(events)``.
        finish_at: the smallest prefix length whose events include the one that says the turn is
            over (finish reason / stop reason): a cut before it must never give a final.
        usage_at: the smallest prefix length whose events include the last usage report.
        utf8_inside: offsets that fall inside a multi-byte UTF-8 character.
        args_inside: offsets that fall inside a tool call's streamed argument JSON.
    """

    protocol: str
    events: tuple[bytes, ...]
    body: bytes
    finish_at: int
    usage_at: int
    utf8_inside: tuple[int, ...]
    args_inside: tuple[int, ...]


_FINISH_MARKERS = {"openai-chat": b'"finish_reason":"', "anthropic": b'"stop_reason":"', "gemini": b'"finishReason":"'}
_USAGE_MARKERS = {"openai-chat": b'"usage":{', "anthropic": b'"output_tokens":', "gemini": b'"usageMetadata":{'}
def _argument_offsets(protocol: str, body: bytes) -> list[int]:
    """Offsets strictly inside the wire form of :data:`TOOL_CALL`'s argument JSON."""
    if protocol == "gemini":  # Gemini sends the arguments whole, as a JSON object
        pieces = [json.dumps(TOOL_CALL.arguments, ensure_ascii=False, separators=(",", ":"))]
    else:  # the others stream them as pieces of a JSON string
        pieces = [json.dumps(piece, ensure_ascii=False)[1:-1] for piece in TOOL_CALL.argument_pieces]
    offsets: list[int] = []
    position = 0
    for piece in pieces:
        encoded = piece.encode("utf-8")
        position = body.index(encoded, position)
        offsets.extend(range(position + 1, position + len(encoded)))
        position += len(encoded)
    return offsets


def _dispatched_at(start: int, event: bytes) -> int:
    """Where an event is complete: a CRLF-framed event is dispatched at its last CR already."""
    end = start + len(event)
    return end - 1 if event.endswith(b"\r\n\r\n") else end


def fault_body(
    protocol: str, *, text: Sequence[str] = TEXT_PIECES, tool_calls: Sequence[ToolCallScript] = (TOOL_CALL,)
) -> FaultBody:
    """A turn to cut: ``text`` then ``tool_calls`` (by default :data:`TEXT_PIECES` and :data:`TOOL_CALL`)."""
    events = utf8_events(sse_turn(protocol, text=text, tool_calls=tool_calls))
    body = b"".join(events)
    finish_at = usage_at = -1
    offset = 0
    for event in events:
        done = _dispatched_at(offset, event)
        if finish_at < 0 and _FINISH_MARKERS[protocol] in event:
            finish_at = done
        if _USAGE_MARKERS[protocol] in event:
            usage_at = done
        offset += len(event)
    assert finish_at > 0 and usage_at > 0, protocol
    args_inside = _argument_offsets(protocol, body) if TOOL_CALL in tool_calls else []
    utf8_inside = tuple(i for i, byte in enumerate(body) if 0x80 <= byte < 0xC0)
    return FaultBody(protocol, tuple(events), body, finish_at, usage_at, utf8_inside, tuple(args_inside))


MODES = [(reset, chunked) for reset in (True, False) for chunked in (True, False)]
"""How a cut is served: (TCP reset, else clean FIN) x (chunked, else close-delimited body)."""
_END_MARKERS = {"openai-chat": b"data: [DONE]", "anthropic": b'"type":"message_stop"'}


def end_marker_at(fb: FaultBody) -> int | None:
    """The prefix length that includes the provider's end-of-stream event (Gemini has none)."""
    marker = _END_MARKERS.get(fb.protocol)
    if marker is None:
        return None
    offset = 0
    for event in fb.events:
        offset += len(event)
        if marker in event:
            return offset
    raise AssertionError(f"no end marker in the {fb.protocol} body")


def cut_offsets(fb: FaultBody, rng: random.Random, random_cuts: int = 40) -> list[int]:
    """The offsets to cut at: the interesting ones, then seeded-random ones."""
    interesting = {0, 1, fb.finish_at - 1, fb.finish_at, fb.finish_at + 1, fb.usage_at - 1, fb.usage_at,
                   len(fb.body) - 1, len(fb.body)}
    interesting.update(rng.sample(fb.utf8_inside, 6))
    interesting.update(rng.sample(fb.args_inside, min(6, len(fb.args_inside))))
    marker = end_marker_at(fb)
    if marker is not None:
        interesting.update({marker - 1, marker})
    randoms = set(rng.sample(range(len(fb.body) + 1), random_cuts))
    return sorted(o for o in interesting | randoms if 0 <= o <= len(fb.body))


def cut_response(fb: FaultBody, offset: int, *, reset: bool, chunked: bool) -> StubResponse:
    """The turn's events up to ``offset`` (the event at the cut truncated there), then the fault."""
    steps: list[bytes | Disconnect] = []
    start = 0
    for event in fb.events:
        if start >= offset:
            break
        steps.append(event[: offset - start])
        start += len(event)
    steps.append(Disconnect(reset=reset))
    return StubResponse(body=steps, chunked=chunked)


class Recorder:
    """Records what an Observable emits, each item with a global sequence number, behind latches."""

    _sequence = 0
    _sequence_lock = threading.Lock()

    def __init__(self, *, notify_after: int = 0) -> None:
        self.items: list[Any] = []
        self.stamps: list[int] = []
        self.errors: list[Exception] = []
        self.completed = False
        self.terminal_stamp: int | None = None
        self.done = threading.Event()
        self.reached = threading.Event()
        self._notify_after = notify_after

    @classmethod
    def next_stamp(cls) -> int:
        """A process-wide increasing number (compare emissions with a dispose call)."""
        with cls._sequence_lock:
            cls._sequence += 1
            return cls._sequence

    def on_next(self, item: Any) -> None:
        self.stamps.append(self.next_stamp())
        self.items.append(item)
        if self._notify_after and len(self.items) >= self._notify_after:
            self.reached.set()

    def on_error(self, error: Exception) -> None:
        self.terminal_stamp = self.next_stamp()
        self.errors.append(error)
        self.done.set()

    def on_completed(self) -> None:
        self.terminal_stamp = self.next_stamp()
        self.completed = True
        self.done.set()

    def subscribe(self, source: reactivex.Observable[Any]) -> rx_abc.DisposableBase:
        return source.subscribe(self.on_next, self.on_error, self.on_completed)

    def wait(self, what: str, timeout: float = TIMEOUT) -> None:
        """Wait for the terminal event; fail (never hang) after ``timeout``."""
        assert self.done.wait(timeout), f"hang: {what} did not terminate within {timeout}s"


def final_signature(response: LlmResponse) -> tuple[Any, ...]:
    """What must be equal between a final and the uncut stream's final: text, thoughts, calls, finish."""
    calls = tuple((c.id, c.name, json.dumps(c.args, sort_keys=True)) for c in response.function_calls())
    return (response.text(), calls, response.finish_reason, response.error_code, response.partial)


def open_fds() -> int:
    """How many file descriptors this process holds now."""
    return len(os.listdir("/proc/self/fd"))


class CountingPool(ThreadPoolScheduler):
    """A thread pool that counts the actions still running (to prove no I/O thread stays blocked)."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self._idle = threading.Condition()
        self.running = 0
        self.peak = 0

    def schedule(self, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        def wrapped(scheduler: Any, st: Any) -> Any:
            with self._idle:
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                return action(scheduler, st)
            finally:
                with self._idle:
                    self.running -= 1
                    self._idle.notify_all()

        return super().schedule(wrapped, state)

    def wait_idle(self, timeout: float = TIMEOUT) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self.running == 0, timeout)

    def shutdown(self) -> None:
        """Stop the worker threads and join them."""
        self.executor.shutdown(wait=True)


TRANSPORT_KINDS = ("threads", "asyncio")
"""The two transports every fault runs against: a thread per stream, or a task per stream on one loop."""

Transport = HttpTransport | AsyncHttpTransport


def make_transport(kind: str, *, streams: int = 8, read_timeout: float = TIMEOUT) -> Transport:
    """A fresh transport of ``kind`` (``"threads"`` or ``"asyncio"``); the caller closes it."""
    if kind == "threads":
        return HttpTransport(max_concurrent_streams=streams, read_timeout=read_timeout)
    if kind == "asyncio":
        return AsyncHttpTransport(max_concurrent_streams=streams, read_timeout=read_timeout)
    raise AssertionError(f"unknown transport kind {kind!r}")


def loop_idle(transport: AsyncHttpTransport, timeout: float = TIMEOUT) -> bool:
    """Whether every task on the asyncio transport's loop (but this probe) finishes within ``timeout``."""

    async def others_done() -> bool:
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if not others:
            return True
        _, pending = await asyncio.wait(others, timeout=timeout)
        return not pending

    return bool(asyncio.run_coroutine_threadsafe(others_done(), transport.loop).result(timeout + 1))


def read_request(conn: socket.socket) -> bytes | None:
    """Read one HTTP/1.1 request (head and ``content-length`` body) from ``conn``; return what was
    read after it (``None`` when the peer closed first). Reading the whole request matters: a
    server that closes with unread bytes resets the connection."""
    received = b""
    while b"\r\n\r\n" not in received:
        piece = conn.recv(65536)
        if not piece:
            return None
        received += piece
    head, _, body = received.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            return None
        body += piece
    return body[length:]


class LoopbackRelay:
    """A TCP listener on loopback whose accept thread hands each connection to :meth:`_handle` on a
    thread of its own (a TLS front, a forward proxy). :meth:`close` ends the accept thread."""

    def __init__(self, scheme: str, name: str) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"{scheme}://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
        self._listener.close()
        self._thread.join(5)


def relay(client: socket.socket, upstream: socket.socket) -> None:
    """Relay bytes both ways until either side closes, then close both sockets."""

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: an SSLSocket's drops its TLS state

    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)
    client.close()
    upstream.close()


class TlsFront(LoopbackRelay):
    """A TLS terminator on loopback: accepts TLS with ``context``, relays the plain bytes to ``upstream``
    (a :class:`StubServer`) both ways until either side closes. Counts the handshakes that succeeded."""

    def __init__(self, context: ssl.SSLContext, upstream: tuple[str, int]) -> None:
        self._context = context
        self._upstream = upstream
        self.handshakes = 0
        super().__init__("https", "tls-front")

    def _handle(self, raw: socket.socket) -> None:
        try:
            client = self._context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):  # the client refused our certificate
            raw.close()
            return
        self.handshakes += 1
        relay(client, socket.create_connection(self._upstream))
