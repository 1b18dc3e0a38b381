"""Test kit for rxllm and for users' own models: the contract checker, a scripted model on a
(virtual) clock, a loopback SSE stub server, transcript replay and a pytest plugin
(:mod:`rxllm.testing.pytest_plugin`).

The room imports ``_core``, ``_rx``, ``_models`` and ``providers`` (to replay their wire formats);
only ``cli`` and the front doors sit above it.
"""

from .._core.public import publish as _publish
from ._contract import assert_stream_protocol
from ._recordings import SseRecording, load_sse_recordings
from ._replay import PROTOCOLS, parser_for, replay_sse
from ._scripted import At, ScriptedCall, ScriptedLlm, at_times, scripted_turn
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
from ._virtual_time import record_in_virtual_time
from ._wire import ToolCallScript, complete_json, sse_turn

__all__ = [
    "At",
    "ConnectionRecord",
    "Delay",
    "Disconnect",
    "Hold",
    "PROTOCOLS",
    "RecordedRequest",
    "ScriptedCall",
    "ScriptedLlm",
    "SseRecording",
    "Step",
    "StubResponse",
    "StubServer",
    "ToolCallScript",
    "assert_stream_protocol",
    "at_times",
    "complete_json",
    "load_sse_recordings",
    "parser_for",
    "record_in_virtual_time",
    "replay_sse",
    "scripted_turn",
    "sse_turn",
]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
