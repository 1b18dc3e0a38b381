"""The contenders of ``bench_stream.py``: each floor, rxllm in each shape, the openai SDK.

A contender is ``run(url, n) -> (seconds, seconds to first item, result size)``: it streams ``n``
chunks from the loopback server at ``url`` and returns when the whole result is built. Each floor
is the tightest hand-written loop for its wire format (httpx2 ``iter_lines`` + ``json.loads``, the
HTTP stack rxllm runs on), so a ratio is never flattered by a shared, slower floor. ``floor_text``
also runs on a legacy httpx 0.28 client (``lib=httpx``) while httpx is installed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType

import httpx2

from rxllm import BaseLlm, Content, LlmRequest, LlmResponse, Part, RetryPolicy
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel

Runner = Callable[[str, int], tuple[float, float, int]]
REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("go")])])


def floor_text(url: str, n: int, lib: ModuleType = httpx2) -> tuple[float, float, int]:
    """OpenAI chat: httpx2 iter_lines + json.loads + join: the practical floor."""
    with lib.Client(timeout=60) as client:
        started = time.perf_counter()
        first = 0.0
        pieces: list[str] = []
        with client.stream("POST", f"{url}/text/{n}/chat/completions", json={"model": "bench", "stream": True}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                choices = chunk["choices"]
                if choices:
                    content = choices[0]["delta"].get("content")
                    if content:
                        if not first:
                            first = time.perf_counter() - started
                        pieces.append(content)
        text = "".join(pieces)
        return time.perf_counter() - started, first, len(text)


def floor_tools(url: str, n: int, lib: ModuleType = httpx2) -> tuple[float, float, int]:
    """OpenAI chat tool call: concatenate the argument fragments, parse once."""
    with lib.Client(timeout=60) as client:
        started = time.perf_counter()
        first = 0.0
        pieces: list[str] = []
        with client.stream("POST", f"{url}/tools/{n}/chat/completions", json={"model": "bench", "stream": True}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                choices = chunk["choices"]
                if choices:
                    for call in choices[0]["delta"].get("tool_calls") or ():
                        if not first:
                            first = time.perf_counter() - started
                        pieces.append(call["function"].get("arguments") or "")
        args = json.loads("".join(pieces))
        return time.perf_counter() - started, first, len(args["items"])


def floor_anthropic(url: str, n: int, lib: ModuleType = httpx2) -> tuple[float, float, int]:
    """Anthropic Messages: the text of ``content_block_delta`` events until ``message_stop``."""
    with lib.Client(timeout=60) as client:
        started = time.perf_counter()
        first = 0.0
        pieces: list[str] = []
        with client.stream("POST", f"{url}/anthropic/{n}/v1/messages", json={"model": "bench", "stream": True}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                kind = event["type"]
                if kind == "content_block_delta":
                    delta = event["delta"]
                    if delta["type"] == "text_delta":
                        if not first:
                            first = time.perf_counter() - started
                        pieces.append(delta["text"])
                elif kind == "message_stop":
                    break
        text = "".join(pieces)
        return time.perf_counter() - started, first, len(text)


def floor_gemini(url: str, n: int, lib: ModuleType = httpx2) -> tuple[float, float, int]:
    """Gemini ``streamGenerateContent?alt=sse``: the text parts of the first candidate, to the body's end."""
    with lib.Client(timeout=60) as client:
        started = time.perf_counter()
        first = 0.0
        pieces: list[str] = []
        path = f"{url}/gemini/{n}/v1beta/models/bench:streamGenerateContent?alt=sse"
        with client.stream("POST", path, json={"contents": []}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                candidates = json.loads(line[6:]).get("candidates")
                if candidates:
                    for part in candidates[0].get("content", {}).get("parts", ()):
                        text = part.get("text")
                        if text:
                            if not first:
                                first = time.perf_counter() - started
                            pieces.append(text)
        text = "".join(pieces)
        return time.perf_counter() - started, first, len(text)


def model_for(kind: str, url: str, n: int) -> BaseLlm:
    """The rxllm model that streams ``n`` chunks of ``kind`` from the bench server at ``url``."""
    never = RetryPolicy.never()
    if kind == "anthropic":
        return AnthropicModel("bench", base_url=f"{url}/anthropic/{n}", api_key="bench", retry_policy=never)
    if kind == "gemini":
        return GeminiModel("bench", base_url=f"{url}/gemini/{n}", api_key="bench", retry_policy=never)
    return OpenAiChatModel("bench", base_url=f"{url}/{kind}/{n}", api_key="bench", retry_policy=never)


def rxllm_runner(kind: str, *, keep_partials: bool = False) -> Runner:
    """``generate_content(stream=True)``: every partial delivered (and kept, if asked), the final built."""

    def run(url: str, n: int) -> tuple[float, float, int]:
        model = model_for(kind, url, n)
        done = threading.Event()
        first = [0.0]
        final: list[LlmResponse] = []
        kept: list[LlmResponse] = []
        errors: list[Exception] = []

        def on_next(response: LlmResponse) -> None:
            if response.partial:
                if not first[0]:
                    first[0] = time.perf_counter() - started
                if keep_partials:
                    kept.append(response)
            else:
                final.append(response)

        started = time.perf_counter()
        model.generate_content(REQUEST, stream=True).subscribe(
            on_next, lambda e: (errors.append(e), done.set()), done.set
        )
        done.wait(300)
        elapsed = time.perf_counter() - started
        if errors:
            raise errors[0]
        if kind == "tools":
            size = len(final[0].function_calls()[0].args["items"])  # type: ignore[arg-type]
            first[0] = first[0] or elapsed  # tool calls ride on the final only, by contract
        else:
            size = len(final[0].text())
        if keep_partials:
            assert len(kept) == n, (len(kept), n)
        return elapsed, first[0], size

    return run


def openai_sdk_runner(helper: bool) -> Runner | None:
    """The openai SDK's ``create(stream=True)`` (text accumulated by hand) or its ``.stream()`` helper."""
    try:
        import openai
    except ImportError:
        return None

    def run(url: str, n: int) -> tuple[float, float, int]:
        client = openai.OpenAI(base_url=f"{url}/text/{n}", api_key="bench", max_retries=0)
        started = time.perf_counter()
        first = 0.0
        if helper:
            with client.chat.completions.stream(model="bench", messages=[{"role": "user", "content": "go"}]) as s:
                for event in s:
                    if not first and event.type == "content.delta":
                        first = time.perf_counter() - started
                text = s.get_final_completion().choices[0].message.content or ""
        else:
            pieces = []
            for chunk in client.chat.completions.create(
                model="bench", messages=[{"role": "user", "content": "go"}], stream=True
            ):
                if chunk.choices and chunk.choices[0].delta.content:
                    if not first:
                        first = time.perf_counter() - started
                    pieces.append(chunk.choices[0].delta.content)
            text = "".join(pieces)
        client.close()
        return time.perf_counter() - started, first, len(text)

    return run


def _raw_events(url: str, path: str) -> Iterator[bytes]:
    """The raw-socket limit's reader: one socket, one ``recv`` loop, chunked framing undone, split on blank lines.

    Yields each event's ``data:`` payload (the bench server sends one ``data:`` line per event, with
    ``event:`` lines before it for Anthropic and CRLF line ends for Gemini).
    """
    host, _, port = url.removeprefix("http://").partition(":")
    with socket.create_connection((host, int(port))) as sock:
        head = f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"
        sock.sendall(head.encode() + b"{}")
        recv = sock.recv
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            buffer += recv(65536)
        buffer = buffer[buffer.index(b"\r\n\r\n") + 4:]
        text = b""  # the decoded body not yet split into events
        position = 0
        while True:  # chunked framing: size line, data, CRLF
            end = buffer.find(b"\r\n", position)
            if end < 0 or ((size := int(buffer[position:end], 16)) and len(buffer) < end + 4 + size):
                more = recv(65536)
                if not more:
                    return
                buffer = buffer[position:] + more
                position = 0
                continue
            if size == 0:
                break
            text += buffer[end + 2:end + 2 + size]
            position = end + 4 + size
            if b"\n\n" in text or b"\r\n\r\n" in text:
                *events, text = text.replace(b"\r\n", b"\n").split(b"\n\n")
                for event in events:
                    for line in event.split(b"\n"):
                        if line.startswith(b"data: "):
                            yield line[6:]


def limit_text(url: str, n: int) -> tuple[float, float, int]:
    """OpenAI chat through the raw-socket limit: ``json.loads`` of each event, the text joined."""
    started = time.perf_counter()
    first = 0.0
    pieces: list[str] = []
    for data in _raw_events(url, f"/text/{n}/chat/completions"):
        if data == b"[DONE]":
            break
        choices = json.loads(data)["choices"]
        if choices:
            content = choices[0]["delta"].get("content")
            if content:
                if not first:
                    first = time.perf_counter() - started
                pieces.append(content)
    text = "".join(pieces)
    return time.perf_counter() - started, first, len(text)


def limit_anthropic(url: str, n: int) -> tuple[float, float, int]:
    """Anthropic Messages through the raw-socket limit."""
    started = time.perf_counter()
    first = 0.0
    pieces: list[str] = []
    for data in _raw_events(url, f"/anthropic/{n}/v1/messages"):
        event = json.loads(data)
        kind = event["type"]
        if kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                if not first:
                    first = time.perf_counter() - started
                pieces.append(delta["text"])
        elif kind == "message_stop":
            break
    text = "".join(pieces)
    return time.perf_counter() - started, first, len(text)


def limit_gemini(url: str, n: int) -> tuple[float, float, int]:
    """Gemini ``alt=sse`` through the raw-socket limit."""
    started = time.perf_counter()
    first = 0.0
    pieces: list[str] = []
    for data in _raw_events(url, f"/gemini/{n}/v1beta/models/bench:streamGenerateContent?alt=sse"):
        candidates = json.loads(data).get("candidates")
        if candidates:
            for part in candidates[0].get("content", {}).get("parts", ()):
                text = part.get("text")
                if text:
                    if not first:
                        first = time.perf_counter() - started
                    pieces.append(text)
    text = "".join(pieces)
    return time.perf_counter() - started, first, len(text)
