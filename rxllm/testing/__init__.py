"""Test kit for rxllm and for users' own models: the contract checker, a scripted model,
a loopback SSE stub server and transcript replay."""

from ._contract import assert_stream_protocol
from ._replay import PROTOCOLS, parser_for, replay_sse
from ._scripted import ScriptedLlm, scripted_turn
from ._stub_server import (
    ConnectionRecord,
    Delay,
    Disconnect,
    Hold,
    RecordedRequest,
    Step,
    StubResponse,
    StubServer,
)
from ._wire import ToolCallScript, complete_json, sse_turn

__all__ = [
    "ConnectionRecord",
    "Delay",
    "Disconnect",
    "Hold",
    "PROTOCOLS",
    "RecordedRequest",
    "ScriptedLlm",
    "Step",
    "StubResponse",
    "StubServer",
    "ToolCallScript",
    "assert_stream_protocol",
    "complete_json",
    "parser_for",
    "replay_sse",
    "scripted_turn",
    "sse_turn",
]
