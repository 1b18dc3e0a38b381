"""Test kit for rxllm and for users' own models: the contract checker, a scripted model,
a loopback SSE stub server and transcript replay."""

from ._contract import assert_stream_protocol
from ._scripted import ScriptedLlm, scripted_turn

__all__ = ["ScriptedLlm", "assert_stream_protocol", "scripted_turn"]
