"""``RunConfig`` and ``StreamingMode``: how one run talks to the model."""

from __future__ import annotations

import enum

from pydantic import Field

from ..._core.genai_types import JsonObject
from ..._core.types import LiveConnectConfig, _Model

__all__ = ["RunConfig", "StreamingMode"]


class StreamingMode(enum.StrEnum):
    """How the flow asks the model, as ADK's ``RunConfig.StreamingMode``.

    ``NONE`` calls ``generate_content(request, stream=False)``: one response per model call.
    ``SSE`` calls ``generate_content(request, stream=True)``: partials, then one final.
    ``BIDI`` goes through ``model.connect(request)``: a live session (``Runner.run_live``, see
    ``docs/live.md``); a model that refuses fails the run at once.
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
            A live connection counts as one call.

    The live options (``BIDI`` runs; ADK's ``RunConfig`` fields of the same names), in genai's
    JSON shapes: ``response_modalities`` (``["TEXT"]`` or ``["AUDIO"]``), ``speech_config``,
    ``input_audio_transcription`` / ``output_audio_transcription`` (``{}`` turns transcription
    on), ``session_resumption`` (``{}`` asks for handles; ``{"handle": ...}`` resumes) and
    ``realtime_input_config``. They become the request's ``live_connect_config``.

    >>> RunConfig(streaming_mode=StreamingMode.SSE).max_llm_calls
    500
    """

    streaming_mode: StreamingMode = StreamingMode.NONE
    max_llm_calls: int = Field(default=500)
    response_modalities: tuple[str, ...] | None = None
    speech_config: JsonObject | None = None
    input_audio_transcription: JsonObject | None = None
    output_audio_transcription: JsonObject | None = None
    session_resumption: JsonObject | None = None
    realtime_input_config: JsonObject | None = None

    def live_connect_config(self) -> LiveConnectConfig:
        """The live options as a request's ``LiveConnectConfig``."""
        return LiveConnectConfig(
            response_modalities=self.response_modalities,
            speech_config=self.speech_config,
            input_audio_transcription=self.input_audio_transcription,
            output_audio_transcription=self.output_audio_transcription,
            session_resumption=self.session_resumption,
            realtime_input_config=self.realtime_input_config,
        )
