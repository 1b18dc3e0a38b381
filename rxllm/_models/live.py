"""What a live (BIDI) session's ``receive()`` emits: the pure core, with no socket in it.

A provider's live protocol (Gemini's BidiGenerateContent, OpenAI's Realtime API) is translated
in two steps, each a plain object tested on its own:

1. A :class:`LiveProtocol` (one per provider) turns each server message into a list of
   :data:`LiveEvent` (a text delta, an audio delta, a transcription piece, the function calls,
   the end of a turn...) and each caller's send into the frames to write. It raises a
   :class:`~rxllm.ProtocolError` for a message it cannot read.
2. One :class:`LiveTurnAggregator` per session turns those events into
   :class:`~rxllm.LlmResponse` items by the rules of ``docs/live.md``, the same for every
   provider:

   * a text delta is a partial response with a text part (role ``model``); an audio delta is a
     partial response with an inline-data :class:`~rxllm.Blob` part (its MIME type carries the
     sample rate, ``audio/pcm;rate=24000``);
   * a transcription piece is a partial response with ``input_transcription`` /
     ``output_transcription`` holding the new text; when the transcription is over (the provider
     says so; the input's when the model starts answering; both at the turn's end) a non-partial
     response carries the whole text with ``finished=True``;
   * the model asking for tools is a non-partial response with the turn's text since the last
     non-partial and the function calls (a call to a function the session did not declare is a
     ``ProtocolError``);
   * the end of a turn is a non-partial response with ``turn_complete=True``, the text since the
     last non-partial (if any) and the turn's usage (the only response with usage);
   * a barge-in is a non-partial response with ``interrupted=True`` and the text so far;
   * a go-away notice, a session-resumption handle and a tool-call cancellation are each a
     non-partial response with ``go_away`` / ``live_session_resumption_update`` /
     ``tool_call_cancellation`` set.

ADK Java's ``GeminiLlmConnection`` follows the same shape (partials while the model speaks, the
whole text with ``turnComplete``); rxllm writes the rule down for every provider it speaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from .._core.errors import ProtocolError
from .._core.genai_types import (
    LiveServerGoAway,
    LiveServerSessionResumptionUpdate,
    LiveServerToolCallCancellation,
    Transcription,
)
from .._core.types import Blob, Content, FunctionCall, LlmResponse, Part, UsageMetadata

__all__ = [
    "LiveAudio",
    "LiveEvent",
    "LiveGoAway",
    "LiveInterrupted",
    "LiveProtocol",
    "LiveResumption",
    "LiveSetupComplete",
    "LiveText",
    "LiveToolCalls",
    "LiveToolCancellation",
    "LiveTranscript",
    "LiveTurnAggregator",
    "LiveTurnComplete",
    "LiveUsage",
]

Direction = Literal["input", "output"]


@dataclass(frozen=True, slots=True)
class LiveSetupComplete:
    """The server accepted the session's setup."""


@dataclass(frozen=True, slots=True)
class LiveText:
    """New text of the model's turn (``thought`` for reasoning text)."""

    text: str
    thought: bool = False


@dataclass(frozen=True, slots=True)
class LiveAudio:
    """New audio of the model's turn."""

    data: bytes
    mime_type: str


@dataclass(frozen=True, slots=True)
class LiveTranscript:
    """A transcription of the user's speech (``input``) or the model's (``output``): ``text`` is the
    new piece; with ``finished`` it ends the transcription, and a non-``None`` ``text`` is then the
    whole of it (providers that send the whole text at the end) rather than a last piece."""

    direction: Direction
    text: str | None
    finished: bool = False


@dataclass(frozen=True, slots=True)
class LiveToolCalls:
    """The model asks for these function calls."""

    calls: tuple[FunctionCall, ...]


@dataclass(frozen=True, slots=True)
class LiveToolCancellation:
    """The server no longer wants answers to these calls."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LiveUsage:
    """Token counts of the turn so far (the last one seen in a turn counts)."""

    usage: UsageMetadata


@dataclass(frozen=True, slots=True)
class LiveInterrupted:
    """The user barged in: the model stopped speaking."""


@dataclass(frozen=True, slots=True)
class LiveTurnComplete:
    """The model's turn is over."""


@dataclass(frozen=True, slots=True)
class LiveGoAway:
    """The server will end the session soon."""

    time_left: str | None


@dataclass(frozen=True, slots=True)
class LiveResumption:
    """A session-resumption handle."""

    update: LiveServerSessionResumptionUpdate


LiveEvent = (
    LiveSetupComplete
    | LiveText
    | LiveAudio
    | LiveTranscript
    | LiveToolCalls
    | LiveToolCancellation
    | LiveUsage
    | LiveInterrupted
    | LiveTurnComplete
    | LiveGoAway
    | LiveResumption
)
"""One thing a live server said, in provider-neutral terms."""


class LiveProtocol(Protocol):
    """One provider's live wire format: frames out, events in. Stateful per session (a decoder
    may gather a function call's argument deltas); used from one thread at a time per direction.

    Attributes:
        provider: the provider's name, for errors.
        awaits_setup: whether the caller's frames wait for :class:`LiveSetupComplete`.
    """

    provider: str
    awaits_setup: bool

    def opening(self) -> list[str]:
        """The frames that open the session (Gemini's ``setup``, OpenAI's ``session.update``)."""
        ...

    def history(self, contents: Sequence[Content]) -> list[str]:
        """The frames that send the conversation so far."""
        ...

    def content(self, content: Content) -> list[str]:
        """The frames that send one turn: the user's words, or function responses."""
        ...

    def realtime(self, blob: Blob) -> list[str]:
        """The frames that send a piece of real-time media (audio, an image, text)."""
        ...

    def decode(self, message: str | bytes) -> list[LiveEvent]:
        """The events of one server message.

        Raises:
            ProtocolError: the message is not one the protocol knows (invalid JSON, an unknown
                type, a binary frame where text is expected, a server-side error).
        """
        ...


class LiveTurnAggregator:
    """Turns a session's :data:`LiveEvent` items into its responses (the module's rules).

    Args:
        declared: the function names the session declared; a call to another one raises
            :class:`~rxllm.ProtocolError`. ``None`` checks nothing.
        provider: the provider's name, for errors.

    >>> aggregator = LiveTurnAggregator()
    >>> [(r.text(), r.partial, r.turn_complete) for e in (LiveText("Hi"), LiveText("!"), LiveTurnComplete())
    ...  for r in aggregator.feed(e)]
    [('Hi', True, None), ('!', True, None), ('Hi!', None, True)]
    """

    def __init__(self, declared: Iterable[str] | None = None, *, provider: str | None = None) -> None:
        self._declared = None if declared is None else frozenset(declared)
        self._provider = provider
        self._text: list[str] = []
        self._thought: list[str] = []
        self._usage: UsageMetadata | None = None
        self._transcripts: dict[Direction, list[str]] = {"input": [], "output": []}
        self._open: dict[Direction, bool] = {"input": False, "output": False}
        self._in_turn = False

    @property
    def in_turn(self) -> bool:
        """Whether a model turn has started and not ended (a connection lost now loses it)."""
        return self._in_turn

    def feed(self, event: LiveEvent) -> list[LlmResponse]:
        """The responses ``event`` makes, in order (often one, sometimes none)."""
        if isinstance(event, LiveText):
            self._model_speaks()
            (self._thought if event.thought else self._text).append(event.text)
            part = Part(text=event.text, thought=True) if event.thought else Part(text=event.text)
            return [*self._flush_input(), _partial(part)]
        if isinstance(event, LiveAudio):
            self._model_speaks()
            return [*self._flush_input(), _partial(Part(inline_data=Blob(mime_type=event.mime_type, data=event.data)))]
        if isinstance(event, LiveTranscript):
            return self._transcript(event)
        if isinstance(event, LiveToolCalls):
            return self._tool_calls(event.calls)
        if isinstance(event, LiveUsage):
            self._usage = event.usage
            return []
        if isinstance(event, LiveInterrupted):
            flushed = [*self._flush_input(), *self._flush_transcript("output")]
            return [*flushed, LlmResponse(content=self._take_content(()), interrupted=True)]
        if isinstance(event, LiveTurnComplete):
            flushed = [*self._flush_input(), *self._flush_transcript("output")]
            usage, self._usage, self._in_turn = self._usage, None, False
            return [*flushed, LlmResponse(content=self._take_content(()), turn_complete=True, usage_metadata=usage)]
        if isinstance(event, LiveToolCancellation):
            return [LlmResponse(tool_call_cancellation=LiveServerToolCallCancellation(ids=event.ids))]
        if isinstance(event, LiveGoAway):
            return [LlmResponse(go_away=LiveServerGoAway(time_left=event.time_left))]
        if isinstance(event, LiveResumption):
            return [LlmResponse(live_session_resumption_update=event.update)]
        return []  # LiveSetupComplete: the connection's business

    # -- internals

    def _model_speaks(self) -> None:
        self._in_turn = True

    def _transcript(self, event: LiveTranscript) -> list[LlmResponse]:
        direction = event.direction
        out: list[LlmResponse] = []
        if direction == "output":
            self._model_speaks()
            out.extend(self._flush_input())
        if not event.finished:
            if event.text:
                self._transcripts[direction].append(event.text)
                self._open[direction] = True
                out.append(_transcription(direction, Transcription(text=event.text), partial=True))
            return out
        if event.text is not None:
            self._transcripts[direction] = [event.text]
        self._open[direction] = True
        out.extend(self._flush_transcript(direction))
        return out

    def _flush_input(self) -> list[LlmResponse]:
        return self._flush_transcript("input")

    def _flush_transcript(self, direction: Direction) -> list[LlmResponse]:
        if not self._open[direction]:
            return []
        text = "".join(self._transcripts[direction])
        self._transcripts[direction] = []
        self._open[direction] = False
        return [_transcription(direction, Transcription(text=text, finished=True), partial=None)]

    def _tool_calls(self, calls: tuple[FunctionCall, ...]) -> list[LlmResponse]:
        if self._declared is not None:
            for call in calls:
                if call.name not in self._declared:
                    known = ", ".join(sorted(self._declared)) or "none"
                    raise ProtocolError(
                        f"the model called function {call.name!r}, which the session did not declare "
                        f"(declared: {known})",
                        provider=self._provider,
                    )
        self._model_speaks()
        flushed = self._flush_input()
        return [*flushed, LlmResponse(content=self._take_content([Part(function_call=c) for c in calls]))]

    def _take_content(self, extra: Sequence[Part]) -> Content | None:
        parts: list[Part] = []
        if self._thought:
            parts.append(Part(text="".join(self._thought), thought=True))
        if self._text:
            parts.append(Part(text="".join(self._text)))
        parts.extend(extra)
        self._text, self._thought = [], []
        return Content(role="model", parts=parts) if parts else None


def _partial(part: Part) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=[part]), partial=True)


def _transcription(direction: Direction, transcription: Transcription, *, partial: bool | None) -> LlmResponse:
    if direction == "input":
        return LlmResponse(input_transcription=transcription, partial=partial)
    return LlmResponse(output_transcription=transcription, partial=partial)
