"""Small synchronous Rx building blocks for the agent runtime (defined in ``rxllm._tools._rx``)."""

from __future__ import annotations

from .._tools._rx import call_now, emit_now, fail_now, nothing_now, on_dispose, then_now

__all__ = ["call_now", "emit_now", "fail_now", "nothing_now", "on_dispose", "then_now"]
