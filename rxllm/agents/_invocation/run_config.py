"""``RunConfig`` and ``StreamingMode``: how one run talks to the model."""

from __future__ import annotations

import enum

from pydantic import Field

from ..._core.types import _Model

__all__ = ["RunConfig", "StreamingMode"]


class StreamingMode(enum.StrEnum):
    """How the flow asks the model, as ADK's ``RunConfig.StreamingMode``.

    ``NONE`` calls ``generate_content(request, stream=False)``: one response per model call.
    ``SSE`` calls ``generate_content(request, stream=True)``: partials, then one final.
    ``BIDI`` goes through ``model.connect(request)`` (live sessions); rxllm's flow only checks
    that path: a model that refuses fails the run at once, and a model that accepts fails it too,
    because rxllm.agents does not run live flows yet.
    """

    NONE = "none"
    SSE = "sse"
    BIDI = "bidi"


class RunConfig(_Model):
    """Options of one run.

    Args:
        streaming_mode: see :class:`StreamingMode`; ``NONE`` by default.
        max_llm_calls: the most model calls one run (invocation) may make; the call past it fails
            the run with :class:`~rxllm.LimitExceededError`. Zero or less means no limit, as in ADK.

    >>> RunConfig(streaming_mode=StreamingMode.SSE).max_llm_calls
    500
    """

    streaming_mode: StreamingMode = StreamingMode.NONE
    max_llm_calls: int = Field(default=500)
