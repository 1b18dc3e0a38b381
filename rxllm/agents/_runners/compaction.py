"""Events compaction for long sessions: old invocations summarised into one compaction event.

ADK Java's ``summarizer`` package: :class:`EventsCompactionConfig` (``compaction_interval``,
``overlap_size``, ``summarizer``, ``token_threshold``, ``event_retention_size``),
:class:`BaseEventSummarizer`, :class:`LlmEventSummarizer`, :class:`SlidingWindowEventCompactor`
and :class:`TailRetentionEventCompactor`. The :class:`~rxllm.agents.Runner` given a sliding-window
config runs that compactor after every invocation (after the plugins' ``after_run_callback``),
inside the session's run lane, so the next run's requests already use the summary; given a
tail-retention config it hands the tail compactor to every invocation, and the LLM flow runs it
before each model call (ADK Java's ``Compaction`` request processor), so the summary it stores is
already in that call's request.

A compaction event is authored ``"user"``, has no content and carries
``actions.compaction`` (:class:`~rxllm.agents.EventCompaction`: the first and last summarised
event's timestamps and the summary). The summarised events stay stored; the contents builder
(``rxllm.agents._flows.contents``) shows the summary, as a ``model`` content, in their place.

>>> from reactivex import operators as ops
>>> from rxllm import Chunk
>>> from rxllm.agents import EventsCompactionConfig, InMemoryRunner, LlmAgent, LlmEventSummarizer
>>> from rxllm.testing import ScriptedLlm, scripted_turn
>>> model = ScriptedLlm([scripted_turn(Chunk(text_delta=f"Answer {n}.")) for n in range(2)])
>>> summarizer = LlmEventSummarizer(ScriptedLlm([scripted_turn(Chunk(text_delta="Two questions answered."))]))
>>> runner = InMemoryRunner(LlmAgent("bot", model),
...     events_compaction_config=EventsCompactionConfig(compaction_interval=2, overlap_size=0, summarizer=summarizer))
>>> _ = runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
>>> for question in ("First?", "Second?"):
...     _ = runner.run_async("u1", "s1", question).pipe(ops.to_list()).run()
>>> events = runner.session_service.get_session(runner.app_name, "u1", "s1").run().events
>>> len(events), events[-1].author, events[-1].actions.compaction.compacted_content.text()
(5, 'user', 'Two questions answered.')
"""

from __future__ import annotations

import abc
import json
import logging
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import reactivex

from ..._core.errors import ConfigurationError
from ..._core.types import Content, LlmRequest, LlmResponse, Part
from ..._models.base_llm import BaseLlm
from ..._rx.direct import collect_then, emit_now, nothing_now
from .._sessions.base import BaseSessionService, Session
from .._sessions.event import Event, EventActions, EventCompaction

__all__ = [
    "BaseEventSummarizer",
    "EventsCompactionConfig",
    "LlmEventSummarizer",
    "SlidingWindowEventCompactor",
    "TailRetentionEventCompactor",
]

logger = logging.getLogger("rxllm.agents")


class BaseEventSummarizer(abc.ABC):
    """Summarises events into one compaction event (ADK Java's ``BaseEventSummarizer``)."""

    @abc.abstractmethod
    def summarize_events(self, events: Sequence[Event]) -> reactivex.Observable[Event]:
        """A cold Observable of the compaction event standing for ``events``, or of nothing
        (no summary: nothing is compacted)."""


def _check_count(name: str, value: int | None, minimum: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an int of at least {minimum}, got {value!r}")


@dataclass(frozen=True)
class EventsCompactionConfig:
    """When and how sessions are compacted (ADK Java's ``EventsCompactionConfig``).

    Two ways, each on when its two settings are given (both may be):

    - **Sliding window** (``compaction_interval`` and ``overlap_size``): after every invocation
      the :class:`~rxllm.agents.Runner` runs a :class:`SlidingWindowEventCompactor`. Every
      summary stays in the requests unless a later one covers it (ADK Java's contents rule), so a
      request still grows by one summary per ``compaction_interval`` invocations.
    - **Tail retention** (``token_threshold`` and ``event_retention_size``): before every model
      call of an ``LlmAgent`` (ADK Java's ``Compaction`` request processor) a
      :class:`TailRetentionEventCompactor` checks the session; once the prompt is over the
      threshold, it summarises everything but the last ``event_retention_size`` events, the latest
      summary included, so each summary covers the one before and a request holds one summary and
      a bounded tail, however long the session.

    Attributes:
        compaction_interval: the number of new user-initiated invocations, fully stored, that
            trigger a sliding-window compaction.
        overlap_size: how many invocations before the new ones a sliding-window compaction
            summarises again, so consecutive summaries overlap.
        summarizer: what writes the summary; None: an :class:`LlmEventSummarizer` on the root
            agent's model (the runner's agent must then be an ``LlmAgent``), as ADK's Runner does.
        token_threshold: tail retention: the prompt size, in tokens, above which the session is
            compacted: the latest event's ``usage_metadata.prompt_token_count``, or when no event
            has one, the events' text length divided by four (ADK Java's estimate).
        event_retention_size: tail retention: how many of the latest events stay out of the summary.

    Raises:
        ConfigurationError: neither way configured, only one setting of a way, an interval below 1,
            or a negative overlap, threshold or retention size.
    """

    compaction_interval: int | None = None
    overlap_size: int | None = None
    summarizer: BaseEventSummarizer | None = None
    token_threshold: int | None = None
    event_retention_size: int | None = None

    def __post_init__(self) -> None:
        _check_count("compaction_interval", self.compaction_interval, 1)
        _check_count("overlap_size", self.overlap_size, 0)
        _check_count("token_threshold", self.token_threshold, 0)
        _check_count("event_retention_size", self.event_retention_size, 0)
        for first, second in (("compaction_interval", "overlap_size"), ("token_threshold", "event_retention_size")):
            if (getattr(self, first) is None) != (getattr(self, second) is None):
                raise ConfigurationError(f"EventsCompactionConfig: give {first} and {second} together")
        if not (self.has_sliding_window or self.has_tail_retention):
            raise ConfigurationError(
                "EventsCompactionConfig compacts nothing: give compaction_interval and overlap_size (a sliding "
                "window), token_threshold and event_retention_size (tail retention), or both"
            )
        if self.summarizer is not None and not isinstance(self.summarizer, BaseEventSummarizer):
            raise ConfigurationError(f"summarizer must be a BaseEventSummarizer, got {type(self.summarizer).__name__}")

    @property
    def has_sliding_window(self) -> bool:
        """Whether the runner compacts after invocations (ADK Java's ``hasSlidingWindowCompactionConfig``)."""
        return self.compaction_interval is not None and self.overlap_size is not None

    @property
    def has_tail_retention(self) -> bool:
        """Whether the flow compacts before model calls (``token_threshold`` and ``event_retention_size``)."""
        return self.token_threshold is not None and self.event_retention_size is not None


class LlmEventSummarizer(BaseEventSummarizer):
    """Asks a model to summarise the events (ADK Java's ``LlmEventSummarizer``).

    One non-streaming call whose single user message is ``prompt_template`` with
    ``{conversation_history}`` replaced by one line per part: ``role: text``,
    ``role: [FUNCTION_CALL: name(args)]`` or ``role: [FUNCTION_RESPONSE: name -> response]``.
    The model's answer, with role ``model``, is the compacted content. A model error fails the
    Observable (and the run whose compaction it was); an answer without content summarises nothing.
    """

    DEFAULT_PROMPT_TEMPLATE = (
        "The following is a conversation history between a user and an AI agent. Please summarize the "
        "conversation, focusing on key information and decisions made, as well as any unresolved questions or "
        "tasks. The summary should be concise and capture the essence of the interaction.\n\n"
        "{conversation_history}\n"
    )

    def __init__(self, llm: BaseLlm, prompt_template: str = DEFAULT_PROMPT_TEMPLATE) -> None:
        if not isinstance(llm, BaseLlm):
            raise ConfigurationError(f"LlmEventSummarizer needs a BaseLlm, got {type(llm).__name__}")
        self._llm = llm
        self._prompt_template = prompt_template

    @property
    def llm(self) -> BaseLlm:
        """The model that writes the summaries."""
        return self._llm

    def summarize_events(self, events: Sequence[Event]) -> reactivex.Observable[Event]:
        """The compaction event for ``events`` (nothing for no events); see the class."""
        if not events:
            return nothing_now()
        prompt = self._prompt_template.replace("{conversation_history}", format_events_for_prompt(events))
        request = LlmRequest(model=self._llm.model, contents=(Content(role="user", parts=(Part.from_text(prompt),)),))
        start, end = events[0].timestamp, events[-1].timestamp

        def to_event(responses: list[LlmResponse]) -> reactivex.Observable[Event]:
            finals = [r for r in responses if not r.partial]
            if not finals or finals[0].content is None:
                return nothing_now()
            summary = finals[0].content.model_copy(update={"role": "model"})
            compaction = EventCompaction(start_timestamp=start, end_timestamp=end, compacted_content=summary)
            return emit_now(
                Event(author="user", invocation_id=Event.new_id(), actions=EventActions(compaction=compaction))
            )

        return collect_then(self._llm.generate_content(request, stream=False), to_event)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def format_events_for_prompt(events: Sequence[Event]) -> str:
    """The conversation lines of ``LlmEventSummarizer``'s prompt (ADK Java's ``formatEventsForPrompt``)."""
    lines: list[str] = []
    for event in events:
        if event.content is None:
            continue
        role = event.content.role or event.author
        for part in event.content.parts:
            if part.text:
                lines.append(f"{role}: {part.text}")
            elif part.function_call is not None:
                call = part.function_call
                lines.append(f"{role}: [FUNCTION_CALL: {call.name}({_json(call.args)})]")
            elif part.function_response is not None:
                response = part.function_response
                lines.append(f"{role}: [FUNCTION_RESPONSE: {response.name} -> {_json(response.response)}]")
    return "\n".join(lines)


class SlidingWindowEventCompactor:
    """Compacts a session in a sliding window (ADK Java's ``SlidingWindowEventCompactor``).

    Once ``compaction_interval`` invocations are stored after the latest compaction's end, the
    events of those invocations and of the ``overlap_size`` invocations before them are
    summarised and the summary's event appended. With interval 2 and overlap 1 over invocations
    1..4: after 2, a compaction of [1, 2]; after 3 nothing; after 4, a compaction of [2, 4].
    """

    def __init__(self, config: EventsCompactionConfig) -> None:
        if config.summarizer is None:
            raise ConfigurationError("SlidingWindowEventCompactor needs a config with a summarizer")
        if config.compaction_interval is None or config.overlap_size is None:
            raise ConfigurationError("SlidingWindowEventCompactor needs compaction_interval and overlap_size")
        self._interval = config.compaction_interval
        self._overlap = config.overlap_size
        self._summarizer = config.summarizer

    def events_to_compact(self, events: Sequence[Event]) -> list[Event]:
        """The events the next compaction summarises, oldest first; empty when none is due."""
        interval, overlap = self._interval, self._overlap
        picked: list[Event] = []
        invocations: set[str] = set()
        last_compacted = float("-inf")
        target = -1
        for event in reversed(events):
            compaction = event.actions.compaction
            if compaction is not None:
                last_compacted = max(last_compacted, compaction.end_timestamp)
                continue
            invocation = event.invocation_id
            if not invocation:
                continue
            if invocation in invocations:
                picked.append(event)  # every event of an invocation picked
                continue
            if event.timestamp <= last_compacted:
                if len(invocations) < interval:
                    break
                if target < 0:
                    target = len(invocations) + overlap
            if target < 0 or len(invocations) < target:
                picked.append(event)
                invocations.add(invocation)
            else:
                break
        if len(invocations) < interval:
            return []
        picked.reverse()
        return picked

    def compact(self, session: Session, session_service: BaseSessionService) -> reactivex.Observable[Event]:
        """Append a compaction event to ``session`` when one is due; emit the stored event, or nothing."""
        events = self.events_to_compact(session.events)
        if not events:
            return nothing_now()
        logger.debug("compacting %d events of session %s", len(events), session.id)

        def append(summaries: list[Event]) -> reactivex.Observable[Event]:
            return session_service.append_event(session, summaries[0]) if summaries else nothing_now()

        return collect_then(self._summarizer.summarize_events(events), append)


def _stringify(event: Event) -> str:
    """The event's text, calls and responses as one string (ADK Java's ``Event.stringifyContent``)."""
    pieces: list[str] = []
    for part in event.content.parts if event.content is not None else ():
        if part.text:
            pieces.append(part.text)
        if part.function_call is not None:
            pieces.append(f"Function Call: {part.function_call.name}({_json(part.function_call.args)})")
        if part.function_response is not None:
            response = part.function_response
            pieces.append(f"Function Response: {response.name} -> {_json(response.response)}")
    return "".join(pieces)


def _latest_prompt_tokens(events: Sequence[Event]) -> int | None:
    for event in reversed(events):
        usage = event.usage_metadata
        if usage is not None and usage.prompt_token_count is not None:
            return usage.prompt_token_count
    return None


class TailRetentionEventCompactor:
    """Compacts a session once its prompt is too long, keeping a tail (ADK Java's ``TailRetentionEventCompactor``).

    Run by the LLM flow before every model call (ADK Java's ``Compaction`` request processor) when
    :class:`EventsCompactionConfig` has ``token_threshold`` and ``event_retention_size``. Nothing
    is compacted while the prompt is within ``token_threshold`` tokens: the latest event's
    ``usage_metadata.prompt_token_count`` when an event has one, else a quarter of the length of
    the events' text since the latest summary (the summary included). Otherwise the events since
    the latest summary's end, with that summary in front (as an event of its start time with the
    summary as its content), are summarised, all but the last ``event_retention_size`` of them.
    The new summary starts where the latest began, so it covers it and the contents builder
    shows only the new one: a request holds one summary and the tail after it.

    Args:
        summarizer: what writes the summaries.
        retention_size: how many of the latest events stay out of a summary (at least 0).
        token_threshold: the prompt size above which the session is compacted (at least 0).
    """

    def __init__(self, summarizer: BaseEventSummarizer, retention_size: int, token_threshold: int) -> None:
        if not isinstance(summarizer, BaseEventSummarizer):
            raise ConfigurationError(f"summarizer must be a BaseEventSummarizer, got {type(summarizer).__name__}")
        _check_count("retention_size", retention_size, 0)
        _check_count("token_threshold", token_threshold, 0)
        self._summarizer = summarizer
        self._retention = retention_size
        self._threshold = token_threshold
        # the events the latest prompt-token lookup walked, and what it found: the next lookup on
        # the same events and more walks only the new ones (one tuple, swapped whole: thread-safe)
        self._prompt_tokens_seen: tuple[tuple[Event, ...], int | None] = ((), None)

    def _prompt_tokens(self, events: Sequence[Event]) -> int | None:
        """``_latest_prompt_tokens(events)``, walking only the events after the ones seen last (same objects)."""
        seen, count = self._prompt_tokens_seen
        size = len(seen)
        if size and len(events) >= size and all(map(operator.is_, seen, events)):
            newer = _latest_prompt_tokens(list(islice(events, size, None)))
            if newer is not None:
                count = newer
        else:
            count = _latest_prompt_tokens(events)
        self._prompt_tokens_seen = (events if isinstance(events, tuple) else tuple(events), count)
        return count

    def events_to_compact(self, events: Sequence[Event]) -> list[Event]:
        """The events the next compaction summarises, oldest first; empty when none is due."""
        count = self._prompt_tokens(events)
        if count is not None and count <= self._threshold:
            return []
        boundary = float("-inf")
        latest: Event | None = None
        picked: list[Event] = []
        for event in reversed(events):
            compaction = event.actions.compaction
            if compaction is None:
                if event.timestamp <= boundary:
                    break  # the latest summary covers this one and all before it
                picked.append(event)
                continue
            if latest is None:  # the latest summary sets the boundary; older ones are ignored
                latest, boundary = event, compaction.end_timestamp
        if latest is not None and latest.actions.compaction is not None:
            span = latest.actions.compaction
            update = {"content": span.compacted_content, "timestamp": span.start_timestamp}
            picked.append(latest.model_copy(update=update))
        picked.reverse()
        if count is None and sum(len(_stringify(event)) for event in picked) // 4 <= self._threshold:
            return []
        if len(picked) <= self._retention:
            return []
        return picked[: len(picked) - self._retention]

    def compact(self, session: Session, session_service: BaseSessionService) -> reactivex.Observable[Event]:
        """Append a compaction event to ``session`` when one is due; emit the stored event, or nothing."""
        events = self.events_to_compact(session.events)
        if not events:
            return nothing_now()
        logger.debug("compacting %d events of session %s, keeping %d", len(events), session.id, self._retention)

        def append(summaries: list[Event]) -> reactivex.Observable[Event]:
            return session_service.append_event(session, summaries[0]) if summaries else nothing_now()

        return collect_then(self._summarizer.summarize_events(events), append)
