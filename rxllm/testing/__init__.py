"""Test kit for rxllm and for users' own models: the contract checker, a scripted model,
a loopback SSE stub server and transcript replay."""

from ._contract import assert_stream_protocol
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

__all__ = [
    "ConnectionRecord",
    "Delay",
    "Disconnect",
    "Hold",
    "RecordedRequest",
    "ScriptedLlm",
    "Step",
    "StubResponse",
    "StubServer",
    "assert_stream_protocol",
    "scripted_turn",
]
