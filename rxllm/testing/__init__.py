"""Test kit for rxllm and for users' own models: the contract checker, a scripted model on a
(virtual) clock, a loopback SSE stub server, transcript replay and a pytest plugin
(:mod:`rxllm.testing.pytest_plugin`).

Every name loads from its module on first use, so importing this package (as the pytest plugin
does in every test session of a project that has rxllm installed) costs nothing and imports no
HTTP library: the replay helpers load the provider parsers only when asked for.
"""

# Layering (docs/architecture.md): this package imports _core, _rx, _models and providers (to replay their
# wire formats); only cli and the front doors sit above it.

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from .._core.public import publish as _publish

if _TYPE_CHECKING:
    from ._contract import assert_stream_protocol
    from ._live_stub import (
        CloseWith,
        Drop,
        Expect,
        LiveConnectionRecord,
        LiveStep,
        LiveStubServer,
        Oversized,
        Reply,
        gemini,
        openai,
    )
    from ._recordings import SseRecording, load_sse_recordings
    from ._replay import PROTOCOLS, parser_for, replay_sse
    from ._scripted import At, LiveSend, ScriptedCall, ScriptedConnection, ScriptedLlm, at_times, scripted_turn
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
    "CloseWith",
    "ConnectionRecord",
    "Delay",
    "Disconnect",
    "Drop",
    "Expect",
    "Hold",
    "LiveConnectionRecord",
    "LiveSend",
    "LiveStep",
    "LiveStubServer",
    "Oversized",
    "PROTOCOLS",
    "RecordedRequest",
    "Reply",
    "ScriptedCall",
    "ScriptedConnection",
    "ScriptedLlm",
    "SseRecording",
    "Step",
    "StubResponse",
    "StubServer",
    "ToolCallScript",
    "assert_stream_protocol",
    "at_times",
    "complete_json",
    "gemini",
    "load_sse_recordings",
    "openai",
    "parser_for",
    "record_in_virtual_time",
    "replay_sse",
    "scripted_turn",
    "sse_turn",
]

_MODULES = {
    "._contract": ("assert_stream_protocol",),
    "._live_stub": (
        "CloseWith", "Drop", "Expect", "LiveConnectionRecord", "LiveStep", "LiveStubServer", "Oversized", "Reply",
        "gemini", "openai",
    ),
    "._recordings": ("SseRecording", "load_sse_recordings"),
    "._replay": ("PROTOCOLS", "parser_for", "replay_sse"),
    "._scripted": ("At", "LiveSend", "ScriptedCall", "ScriptedConnection", "ScriptedLlm", "at_times", "scripted_turn"),
    "._stub_server": (
        "ConnectionRecord", "Delay", "Disconnect", "Hold", "RecordedRequest", "Step", "StubResponse", "StubServer",
    ),
    "._virtual_time": ("record_in_virtual_time",),
    "._wire": ("ToolCallScript", "complete_json", "sse_turn"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> _Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    _publish(__name__, {name: value}, (name,))  # its public path (rxllm._core.public)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
