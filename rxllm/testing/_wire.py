"""Scripted provider wire bodies: what OpenAI, Anthropic or Gemini would send for a given turn.

Serve them with :class:`~rxllm.testing.StubServer` to test a pipeline against a provider's real
wire format without a key or a network:

>>> from rxllm.testing import ToolCallScript, replay_sse, parser_for, sse_turn
>>> events = sse_turn("anthropic", text=["Let me ", "check."],
...                   tool_calls=[ToolCallScript("call_1", "get_order", ['{"order_id": ', '"A17"}'])])
>>> final = replay_sse(b"".join(events), parser_for("anthropic"))[-1]
>>> final.text(), [(c.name, c.args) for c in final.function_calls()]
('Let me check.', [('get_order', {'order_id': 'A17'})])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core.errors import ConfigurationError

__all__ = ["ToolCallScript", "complete_json", "sse_turn"]


@dataclass(frozen=True)
class ToolCallScript:
    """A tool call to script: its id, name and the pieces its JSON arguments arrive in."""

    id: str
    name: str
    argument_pieces: Sequence[str] = field(default=("{}",))

    @property
    def arguments(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads("".join(self.argument_pieces))
        return parsed


def _data(payload: object, *, event: str | None = None, line_end: str = "\n") -> bytes:
    head = f"event: {event}{line_end}" if event else ""
    return f"{head}data: {json.dumps(payload, separators=(',', ':'))}{line_end}{line_end}".encode()


def _openai(text: Sequence[str], calls: Sequence[ToolCallScript], usage: tuple[int, int]) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _data({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "model": "stub",
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": piece}) for piece in text]
    for index, call in enumerate(calls):
        first = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        out.append(chunk({"tool_calls": [first]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in call.argument_pieces]
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    prompt, completion = usage
    out.append(_data({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "model": "stub", "choices": [],
                      "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                "total_tokens": prompt + completion}}))
    out.append(b"data: [DONE]\n\n")
    return out


def _anthropic(text: Sequence[str], calls: Sequence[ToolCallScript], usage: tuple[int, int]) -> list[bytes]:
    prompt, completion = usage
    out = [_data({"type": "message_start", "message": {"id": "msg_stub", "type": "message", "role": "assistant",
                  "model": "stub", "content": [], "usage": {"input_tokens": prompt, "output_tokens": 1}}},
                 event="message_start")]
    index = 0
    if text:
        out.append(_data({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                         event="content_block_start"))
        out += [_data({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                      event="content_block_delta") for piece in text]
        out.append(_data({"type": "content_block_stop", "index": 0}, event="content_block_stop"))
        index = 1
    for call in calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        out.append(_data({"type": "content_block_start", "index": index, "content_block": block},
                         event="content_block_start"))
        out += [_data({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": piece}}, event="content_block_delta")
                for piece in call.argument_pieces]
        out.append(_data({"type": "content_block_stop", "index": index}, event="content_block_stop"))
        index += 1
    out.append(_data({"type": "message_delta", "delta": {"stop_reason": "tool_use" if calls else "end_turn"},
                      "usage": {"output_tokens": completion}}, event="message_delta"))
    out.append(_data({"type": "message_stop"}, event="message_stop"))
    return out


def _gemini(text: Sequence[str], calls: Sequence[ToolCallScript], usage: tuple[int, int]) -> list[bytes]:
    def chunk(parts: list[dict[str, Any]], last: bool = False) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        payload: dict[str, Any] = {"candidates": [candidate], "modelVersion": "stub"}
        if last:
            candidate["finishReason"] = "STOP"
            prompt, completion = usage
            payload["usageMetadata"] = {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                                        "totalTokenCount": prompt + completion}
        return _data(payload, line_end="\r\n")

    out = [chunk([{"text": piece}]) for piece in text]
    out += [chunk([{"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}}]) for call in calls]
    out.append(chunk([{"text": ""}], last=True))
    return out


_BUILDERS = {"openai-chat": _openai, "anthropic": _anthropic, "gemini": _gemini}


def sse_turn(
    protocol: str,
    *,
    text: Sequence[str] = (),
    tool_calls: Sequence[ToolCallScript] = (),
    usage: tuple[int, int] = (12, 8),
) -> list[bytes]:
    """The SSE events (one ``bytes`` each) a provider sends for one streamed turn.

    Args:
        protocol: ``"openai-chat"``, ``"anthropic"`` or ``"gemini"``.
        text: the answer text, in the pieces it streams in.
        tool_calls: tool calls after the text (Gemini sends each call whole, as it does).
        usage: ``(prompt tokens, output tokens)``.

    Raises:
        ConfigurationError: for another protocol.
    """
    builder = _BUILDERS.get(protocol)
    if builder is None:
        raise ConfigurationError(f"no scripted wire format for {protocol!r}; known: {', '.join(sorted(_BUILDERS))}")
    return builder(text, tool_calls, usage)


def complete_json(protocol: str, text: str, *, usage: tuple[int, int] = (12, 8)) -> dict[str, Any]:
    """The JSON body of a complete, non-streamed answer with ``text`` (``stream=False``).

    Raises:
        ConfigurationError: for a protocol other than the three of :func:`sse_turn`.
    """
    prompt, completion = usage
    if protocol == "openai-chat":
        return {"id": "chatcmpl-stub", "object": "chat.completion", "model": "stub",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}
    if protocol == "anthropic":
        return {"id": "msg_stub", "type": "message", "role": "assistant", "model": "stub",
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": prompt, "output_tokens": completion}}
    if protocol == "gemini":
        return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                                  "totalTokenCount": prompt + completion},
                "modelVersion": "stub"}
    raise ConfigurationError(f"no scripted wire format for {protocol!r}; known: {', '.join(sorted(_BUILDERS))}")
