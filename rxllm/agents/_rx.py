"""Small synchronous Rx building blocks for the agent runtime (defined in ``rxllm._rx``)."""

from __future__ import annotations

from .._rx import (
    Direct,
    call_now,
    collect_then,
    concat_map_now,
    concat_now,
    defer_now,
    emit_now,
    fail_now,
    ignore_items,
    nothing_now,
    on_dispose,
    tap_next,
    then_now,
)

__all__ = [
    "Direct",
    "call_now",
    "collect_then",
    "concat_map_now",
    "concat_now",
    "defer_now",
    "emit_now",
    "fail_now",
    "ignore_items",
    "nothing_now",
    "on_dispose",
    "tap_next",
    "then_now",
]
