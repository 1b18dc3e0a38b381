"""A loopback SSE server for benchmarks that is never the bottleneck.

A raw asyncio server (no framework) in its own process: every body is pre-encoded once
(HTTP/1.1 chunked, one HTTP chunk per SSE event, as providers send them) and written with
a single ``write`` per response, so the server spends microseconds per stream, not per chunk.
Paths: ``/text/{n}/...`` streams n OpenAI chat text chunks; ``/tools/{n}/...`` streams a tool call whose
arguments arrive in n fragments; ``/anthropic/{n}/...`` and ``/gemini/{n}/...`` stream n text chunks in
those providers' wire formats (Anthropic's ``event:`` lines, Gemini's CRLF line ends);
``/a17/...`` plays the order-A17 turn (an OpenAI chat tool call, then, once the request carries the
tool's result, the answer); ``/hold`` sends headers and one event, then holds the stream open (for
open-stream capacity tests). Any method; the request body is read and ignored (except by ``/a17``).

``BenchServer(tls=True)`` serves HTTPS with a certificate from a throwaway CA (``trustme``), whose PEM
is at ``ca_file``; ``connections`` counts the connections the server accepted (server-observed).
"""

from __future__ import annotations

import asyncio
import functools
import json
import multiprocessing
import socket
import ssl
import tempfile
from pathlib import Path
from typing import Any


def _event(payload: dict[str, Any]) -> bytes:
    data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **({"usage": usage} if usage else {}),
    }


@functools.lru_cache(maxsize=16)
def text_body(n: int) -> bytes:
    """``n`` one-token text chunks, a finish chunk with usage, ``[DONE]``; chunked-encoded."""
    parts = [_event(_chunk({"role": "assistant", "content": ""}))]
    parts += [_event(_chunk({"content": f"tok{i % 10} "})) for i in range(n)]
    parts.append(_event(_chunk({}, "stop", {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5})))
    done = b"data: [DONE]\n\n"
    parts.append(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
    return b"".join(parts)


@functools.lru_cache(maxsize=16)
def tools_body(n: int) -> bytes:
    """One tool call whose JSON arguments arrive in ``n`` fragments."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "save", "arguments": '{"items":['}}
    head = {"tool_calls": [call]}
    parts = [_event(_chunk(head))]
    for i in range(n):
        piece = ("," if i else "") + f'"item{i}"'
        parts.append(_event(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})))
    parts.append(_event(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "]}"}}]})))
    parts.append(_event(_chunk({}, "tool_calls", {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5})))
    done = b"data: [DONE]\n\n"
    parts.append(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
    return b"".join(parts)


def _encoded(events: list[bytes]) -> bytes:
    """SSE events (one ``bytes`` each) as one chunked body, one HTTP chunk per event."""
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def tokens(n: int) -> list[str]:
    """The text pieces every text stream carries (``tok0 tok1 ...``)."""
    return [f"tok{i % 10} " for i in range(n)]


@functools.lru_cache(maxsize=16)
def provider_body(protocol: str, n: int) -> bytes:
    """``n`` text chunks in ``protocol``'s wire format (``anthropic`` or ``gemini``), as rxllm.testing scripts them."""
    from rxllm.testing import sse_turn

    return _encoded(sse_turn(protocol, text=tokens(n)))


@functools.lru_cache(maxsize=2)
def a17_body(answer: bool) -> bytes:
    """The order-A17 turn of ``examples/order_status.py``: the tool-call round, or the answer round."""
    from rxllm.testing import ToolCallScript, sse_turn

    if answer:
        return _encoded(sse_turn("openai-chat", text=["Order A17 ", "shipped ", "Tuesday."]))
    call = ToolCallScript("call_1", "get_order", ['{"order_', 'id": "A17"}'])
    return _encoded(sse_turn("openai-chat", text=["Let me look ", "that up."], tool_calls=[call]))


_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counter: Any = None) -> None:
    if counter is not None:
        with counter.get_lock():
            counter.value += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, _, rest = head.partition(b"\r\n")
            path = request_line.split(b" ")[1].decode()
            length = 0
            for line in rest.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            request_body = await reader.readexactly(length) if length else b""
            kind, _, rest_of_path = path.strip("/").partition("/")  # /text/100/chat/completions
            count = rest_of_path.partition("/")[0]
            if kind == "hold":
                writer.write(_HEAD + _event(_chunk({"content": "open"})))
                await writer.drain()
                await reader.read()  # until the client closes
                return
            if kind == "tools":
                body = tools_body(int(count))
            elif kind in ("anthropic", "gemini"):
                body = provider_body(kind, int(count))
            elif kind == "a17":
                body = a17_body(b'"role":"tool"' in request_body.replace(b" ", b""))
            else:
                body = text_body(int(count or 10))
            writer.write(_HEAD + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _serve(sock: socket.socket, tls: ssl.SSLContext | None = None, counter: Any = None) -> None:
    async def main() -> None:
        handle = functools.partial(_handle, counter=counter)
        server = await asyncio.start_server(handle, sock=sock, backlog=4096, limit=1 << 20, ssl=tls)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class BenchServer:
    """The server in a child process; ``url`` is ready when the constructor returns."""

    def __init__(self, *, tls: bool = False) -> None:
        self._counter = multiprocessing.get_context("fork").Value("q", 0)
        context: ssl.SSLContext | None = None
        self.ca_file: str | None = None
        if tls:
            import trustme

            ca = trustme.CA()
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1").configure_cert(context)
            self._ca_dir = tempfile.TemporaryDirectory()
            self.ca_file = str(Path(self._ca_dir.name) / "ca.pem")
            ca.cert_pem.write_to_path(self.ca_file)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(4096)
        self.port = sock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._process = multiprocessing.get_context("fork").Process(
            target=_serve, args=(sock, context, self._counter), daemon=True
        )
        self._process.start()
        sock.close()

    @property
    def connections(self) -> int:
        """Connections the server has accepted so far."""
        return int(self._counter.value)

    def close(self) -> None:
        self._process.terminate()
        self._process.join(5)
        if self.ca_file is not None:
            self._ca_dir.cleanup()

    def __enter__(self) -> BenchServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
