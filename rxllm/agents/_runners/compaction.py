"""Events compaction for long sessions: old invocations summarised into one compaction event.

ADK Java's ``summarizer`` package: :class:`EventsCompactionConfig` (``compaction_interval``,
``overlap_size``, ``summarizer``), :class:`BaseEventSummarizer`, :class:`LlmEventSummarizer` and
:class:`SlidingWindowEventCompactor`. The :class:`~rxllm.agents.Runner` given a config runs the
compactor after every invocation (after the plugins' ``after_run_callback``), inside the session's
run lane, so the next run's requests already use the summary.

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
from collections.abc import Sequence
from dataclasses import dataclass

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
]

logger = logging.getLogger("rxllm.agents")


class BaseEventSummarizer(abc.ABC):
    """Summarises events into one compaction event (ADK Java's ``BaseEventSummarizer``)."""

    @abc.abstractmethod
    def summarize_events(self, events: Sequence[Event]) -> reactivex.Observable[Event]:
        """A cold Observable of the compaction event standing for ``events``, or of nothing
        (no summary: nothing is compacted)."""


@dataclass(frozen=True)
class EventsCompactionConfig:
    """When and how a :class:`~rxllm.agents.Runner` compacts a session (ADK Java's ``EventsCompactionConfig``).

    Attributes:
        compaction_interval: the number of new user-initiated invocations, fully stored, that
            trigger a compaction.
        overlap_size: how many invocations before the new ones a compaction summarises again,
            so consecutive summaries overlap.
        summarizer: what writes the summary; None: an :class:`LlmEventSummarizer` on the root
            agent's model (the runner's agent must then be an ``LlmAgent``), as ADK's Runner does.

    Raises:
        ConfigurationError: for an interval below 1 or a negative overlap.
    """

    compaction_interval: int
    overlap_size: int
    summarizer: BaseEventSummarizer | None = None

    def __post_init__(self) -> None:
        if isinstance(self.compaction_interval, bool) or not isinstance(self.compaction_interval, int):
            raise ConfigurationError(f"compaction_interval must be an int, got {self.compaction_interval!r}")
        if self.compaction_interval < 1:
            raise ConfigurationError(f"compaction_interval must be at least 1, got {self.compaction_interval}")
        if isinstance(self.overlap_size, bool) or not isinstance(self.overlap_size, int) or self.overlap_size < 0:
            raise ConfigurationError(f"overlap_size must be an int of at least 0, got {self.overlap_size!r}")
        if self.summarizer is not None and not isinstance(self.summarizer, BaseEventSummarizer):
            raise ConfigurationError(f"summarizer must be a BaseEventSummarizer, got {type(self.summarizer).__name__}")


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
        self._config = config
        self._summarizer = config.summarizer

    def events_to_compact(self, events: Sequence[Event]) -> list[Event]:
        """The events the next compaction summarises, oldest first; empty when none is due."""
        interval, overlap = self._config.compaction_interval, self._config.overlap_size
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
