"""A provider rxllm does not know: your own ``ChunkParser`` and ``RequestMapper`` on ``SseChatModel``.

"ToyChat" is a made-up SSE protocol, small enough to read in one go:

* request: ``POST {base_url}/generate`` with ``{"model", "system", "turns": [{"from", "text"}], "stream"}``
  and the key in an ``x-api-key`` header;
* stream: ``event: token`` / ``event: think`` (``{"text"}``), ``event: call`` (``{"n", "id", "name",
  "args"}``, the arguments JSON in pieces), ``event: keepalive``, ``event: oops`` (``{"message",
  "busy"}``) and ``event: end`` (``{"why", "tokens": {"in", "out"}}``);
* non-streamed: one JSON object ``{"text", "calls", "why", "tokens"}``.

A loopback stub server plays a ToyChat server. The script streams one turn with a tool call split
in pieces, checks it with ``assert_stream_protocol``, answers the call in a second request, and
checks what the server received.

Run it::

    python examples/custom_provider.py

It exits 0 and prints ``custom provider: OK`` when every check passed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from reactivex import operators as ops

from rxllm import (
    Chunk,
    ConfigurationError,
    Content,
    FinishReason,
    HttpRequest,
    InBandError,
    LlmRequest,
    LlmResponse,
    Part,
    ProtocolError,
    SseChatModel,
    SseEvent,
    ToolCallFragment,
    UsageMetadata,
)
from rxllm.testing import StubResponse, StubServer, assert_stream_protocol

_FINISH = {"done": FinishReason.STOP, "limit": FinishReason.MAX_TOKENS, "blocked": FinishReason.SAFETY}


class ToyChatMapper:
    """``LlmRequest`` → ToyChat HTTP request (a :class:`rxllm.RequestMapper`)."""

    provider = "toychat"

    def __init__(self, *, base_url: str, api_key: str) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"ToyChatMapper(base_url={self._base_url!r})"  # never the key

    def to_http_request(self, llm_request: LlmRequest, *, model: str, stream: bool) -> HttpRequest:
        turns: list[dict[str, Any]] = []
        for content in llm_request.contents:
            for part in content.parts:
                if part.thought:
                    continue  # ToyChat cannot take reasoning back
                if part.text is not None:
                    turns.append({"from": "bot" if content.role == "model" else "user", "text": part.text})
                elif part.function_call is not None:
                    call = part.function_call
                    turns.append({"from": "bot", "call": {"id": call.id, "name": call.name, "args": call.args}})
                elif part.function_response is not None:
                    response = part.function_response
                    turns.append({"from": "tool", "id": response.id, "result": response.response})
                else:
                    raise ConfigurationError("ToyChat takes text, calls and results only", provider=self.provider)
        body: dict[str, Any] = {"model": model, "turns": turns, "stream": stream}
        system = llm_request.config.system_instruction
        if system is not None:
            body["system"] = system.text()
        return HttpRequest(
            url=f"{self._base_url}/generate",
            body=json.dumps(body).encode(),
            headers={"content-type": "application/json", "x-api-key": self._api_key},  # redacted in reprs
        )


class ToyChatParser:
    """One ToyChat SSE event → one :class:`rxllm.Chunk` (a :class:`rxllm.ChunkParser`): translates, never merges."""

    def parse(self, event: SseEvent) -> Chunk | None:
        if event.event == "keepalive":
            return None
        data = _object(event.data)
        if event.event == "token":
            return Chunk(text_delta=_str(data, "text"))
        if event.event == "think":
            return Chunk(thought_delta=_str(data, "text"))
        if event.event == "call":
            arguments = _str(data, "args") if "args" in data else ""
            fragment = ToolCallFragment(_int(data, "n"), _opt_str(data, "id"), _opt_str(data, "name"), arguments)
            return Chunk(tool_call_fragments=(fragment,))
        if event.event == "oops":
            error = InBandError(_str(data, "message"), code="oops", retryable=bool(data.get("busy")))
            return Chunk(error=error, end_of_stream=True)
        if event.event == "end":
            return _finish(data, end_of_stream=True)
        raise ProtocolError(f"unknown ToyChat event {event.event!r}", provider="toychat")

    def parse_response(self, body: bytes) -> Sequence[Chunk]:
        data = _object(body.decode("utf-8", "replace"))
        chunks = [Chunk(text_delta=_str(data, "text"))]
        for n, call in enumerate(data.get("calls") or ()):
            if not isinstance(call, dict):
                raise ProtocolError("a ToyChat call must be an object", provider="toychat")
            arguments = json.dumps(call.get("args", {}))
            fragment = ToolCallFragment(n, _opt_str(call, "id"), _opt_str(call, "name"), arguments, complete=True)
            chunks.append(Chunk(tool_call_fragments=(fragment,)))
        chunks.append(_finish(data, end_of_stream=False))
        return chunks


def _object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"ToyChat sent data that is not JSON: {exc}", provider="toychat") from exc
    if not isinstance(data, dict):
        raise ProtocolError("ToyChat data must be a JSON object", provider="toychat")
    return data


def _str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"ToyChat field {key!r} must be a string", provider="toychat")
    return value


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ProtocolError(f"ToyChat field {key!r} must be a string", provider="toychat")
    return value


def _int(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"ToyChat field {key!r} must be an integer", provider="toychat")
    return value


def _finish(data: dict[str, Any], *, end_of_stream: bool) -> Chunk:
    why = _str(data, "why")
    tokens = data.get("tokens", {})
    if not isinstance(tokens, dict):
        raise ProtocolError("ToyChat 'tokens' must be an object", provider="toychat")
    prompt, output = _int(tokens, "in"), _int(tokens, "out")
    usage = UsageMetadata(prompt_token_count=prompt, candidates_token_count=output, total_token_count=prompt + output)
    return Chunk(finish_reason=_FINISH.get(why, FinishReason.OTHER), raw_finish_reason=why, usage=usage,
                 end_of_stream=end_of_stream)


def toychat_model(model: str, *, base_url: str, api_key: str) -> SseChatModel:
    """A ToyChat model: the mapper, the parser *class* (one parser per attempt), and rxllm's ``SseChatModel``."""
    return SseChatModel(model, mapper=ToyChatMapper(base_url=base_url, api_key=api_key), parser=ToyChatParser)


def sse(event: str, payload: dict[str, Any]) -> bytes:
    """One ToyChat SSE event."""
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()


def first_turn() -> list[bytes]:
    """A thought, two tokens, a keepalive, then a ``get_order`` call whose arguments arrive in two pieces."""
    return [
        sse("think", {"text": "They want order A17."}),
        sse("token", {"text": "Let me "}),
        b"event: keepalive\ndata: {}\n\n",
        sse("token", {"text": "check."}),
        sse("call", {"n": 0, "id": "toy-1", "name": "get_order", "args": '{"order_id": '}),
        sse("call", {"n": 0, "args": '"A17"}'}),
        sse("end", {"why": "done", "tokens": {"in": 21, "out": 9}}),
    ]


def second_turn() -> list[bytes]:
    """The answer."""
    return [sse("token", {"text": "It shipped "}), sse("token", {"text": "Tuesday."}),
            sse("end", {"why": "done", "tokens": {"in": 40, "out": 4}})]


def main() -> int:
    """Run the example; return 0 when every check passed."""
    with StubServer([StubResponse(body=first_turn()), StubResponse(body=second_turn())]) as server:
        model = toychat_model("toy-1", base_url=server.url, api_key="toy-secret")
        question = Content(role="user", parts=(Part.from_text("Where is order A17?"),))

        def show(response: LlmResponse) -> None:
            if response.partial:
                print(f"  partial: thought={response.thought_text()!r} text={response.text()!r}")

        responses = model.generate_content(LlmRequest(contents=(question,)), stream=True).pipe(
            ops.do_action(show), ops.to_list()).run()
        first = assert_stream_protocol(responses)
        calls = [(c.id, c.name, c.args) for c in first.function_calls()]
        usage = first.usage_metadata
        print(f"  final  : text={first.text()!r} calls={calls} tokens={usage.total_token_count if usage else None}")
        result = Content(role="user", parts=(Part.from_function_response("get_order", {"status": "shipped"},
                                                                         id="toy-1"),))
        assert first.content is not None
        answer = model.generate_content(LlmRequest(contents=(question, first.content, result)), stream=True).run()
        print(f"  answer : {answer.text()!r}")
        sent = server.requests[1]
        ok = (
            calls == [("toy-1", "get_order", {"order_id": "A17"})]
            and first.thought_text() == "They want order A17."
            and first.custom_metadata == {"finish_reason": "done"}
            and answer.text() == "It shipped Tuesday."
            and sent.path == "/generate"
            and sent.headers["x-api-key"] == "toy-secret"
            and sent.json()["turns"][-1] == {"from": "tool", "id": "toy-1", "result": {"status": "shipped"}}
        )
        shown = repr(ToyChatMapper(base_url=server.url, api_key="toy-secret").to_http_request(
            LlmRequest(contents=(question,)), model="toy-1", stream=True))
        print(f"  request: {shown}")
        ok = ok and "toy-secret" not in shown  # HttpRequest's repr redacts x-api-key
    print("custom provider: OK" if ok else "custom provider: UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
