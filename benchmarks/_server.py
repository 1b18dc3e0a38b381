"""A loopback SSE server for benchmarks that is never the bottleneck.

A raw asyncio server (no framework) in its own process: every body is pre-encoded once
(HTTP/1.1 chunked, one HTTP chunk per SSE event, as providers send them) and written with
a single ``write`` per response, so the server spends microseconds per stream, not per chunk.
Paths: ``/text/{n}/...`` streams n OpenAI chat text chunks; ``/tools/{n}/...`` streams a tool call whose
arguments arrive in n fragments; ``/hold`` sends headers and one event, then holds the stream
open (for open-stream capacity tests). Any method; the request body is read and ignored.
"""

from __future__ import annotations

import asyncio
import functools
import json
import multiprocessing
import socket
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


_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
            if length:
                await reader.readexactly(length)
            kind, _, rest_of_path = path.strip("/").partition("/")  # /text/100/chat/completions
            count = rest_of_path.partition("/")[0]
            if kind == "hold":
                writer.write(_HEAD + _event(_chunk({"content": "open"})))
                await writer.drain()
                await reader.read()  # until the client closes
                return
            body = tools_body(int(count)) if kind == "tools" else text_body(int(count or 10))
            writer.write(_HEAD + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _serve(sock: socket.socket) -> None:
    async def main() -> None:
        server = await asyncio.start_server(_handle, sock=sock, backlog=4096, limit=1 << 20)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class BenchServer:
    """The server in a child process; ``url`` is ready when the constructor returns."""

    def __init__(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(4096)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._process = multiprocessing.get_context("fork").Process(target=_serve, args=(sock,), daemon=True)
        self._process.start()
        sock.close()

    def close(self) -> None:
        self._process.terminate()
        self._process.join(5)

    def __enter__(self) -> BenchServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
