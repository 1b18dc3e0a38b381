"""Incremental request contents: each model call pays for the events appended since the last one.

``request_contents`` (``rxllm.agents._flows.contents``) rebuilds the whole history on every call,
and ``build_request`` then scrubs every content with ``safe_content``. :class:`IncrementalContents`
gives the same tuple, ``tuple(map(safe_content, request_contents(events, ...)))``, for every input,
keeping what it built from the events it saw:

- **Validation, every call.** It holds the events it last saw; the events it is given must start
  with exactly those objects (identity, not equality: ``1 == True`` would let a changed value
  through), else it rebuilds from scratch. A rewound, edited, reordered or shortened history, a
  session loaded again from a database (fresh objects) or another session's events: a full build.
  Only appended events are taken incrementally. Events are frozen values, so an object seen
  once shows the same contents later.
- **The stable prefix.** Per event, once: partials dropped, dangling calls dropped (the answered
  ids kept as a set), the branch filter, other agents' replies converted, the ``safe_content``
  scrub. A full build instead when an appended event rewinds (``rewind_before_invocation_id``),
  or answers a call an earlier event lost as dangling.
- **Compactions.** The kept summaries and where each stands (a plan of slices of the filtered
  events and summaries) are recomputed when a compaction arrives, by bisection while the
  filtered events' timestamps are in order (the usual case: a few steps per summary), else by
  ``_apply_compactions``' own walk; an appended event after the latest summary's range (or
  inside it) extends the plan as it is.
- **The tail, every call**: the current turn (``include_contents="none"``: a new user message or
  other agent's reply starts the filtered lists again) and the latest function response moved
  next to its call.

:func:`session_request_contents` keeps one builder per (session, agent, branch, mode) in a bounded
least-recently-used table, so a session's next invocation continues where the last one stopped.
"""

from __future__ import annotations

import operator
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from itertools import islice

from ..._core.types import Content
from ..._tools import safe_content
from .._sessions.base import Session, session_key
from .._sessions.event import Event, EventCompaction
from .confirmation import is_request_confirmation_event
from .contents import (
    IncludeContents,
    _content_of,
    _convert_foreign_event,
    _drop_rewound,
    _is_empty,
    _is_other_agent_reply,
    _kept_compactions,
    _latest_function_response_rearranged,
    _summary_event,
    _without_dangling_calls,
    event_belongs_to_branch,
)

__all__ = ["IncrementalContents", "session_request_contents"]

_Piece = tuple[int, int]
"""A piece of the compacted history: ``(lo, hi)`` the filtered events ``lo:hi``; ``(-1, c)`` the
summary of the kept compaction ``c``."""


def _ordered(span: EventCompaction) -> bool:
    """Whether a bisection can stand for the walk against ``span`` (no NaN bound)."""
    return span.start_timestamp == span.start_timestamp and span.end_timestamp == span.end_timestamp


class IncrementalContents:
    """The request contents of ``agent_name`` in ``branch`` from a growing event list, incrementally.

    :meth:`contents` returns ``tuple(map(safe_content, request_contents(events, agent_name=...,
    branch=..., include_contents=...)))`` -- equal for every ``events`` -- doing work for the
    events appended since the previous call only (a full build when ``events`` does not start
    with the previous call's events). Not thread-safe: one caller at a time.
    """

    def __init__(self, agent_name: str, branch: str | None, include_contents: IncludeContents = "default") -> None:
        self._agent_name = agent_name
        self._branch = branch
        self._current_turn_only = include_contents == "none"
        self._reset()

    def _reset(self) -> None:
        self._seen: tuple[Event, ...] = ()
        self._output: tuple[Content, ...] | None = None
        # partials, rewinds and dangling calls applied
        self._kept: list[Event] = []
        self._answered: set[str] = set()
        self._pending: set[str] = set()  # call ids dropped as dangling: answering one needs a full build
        self._turn_start: int | None = None  # include_contents="none": where the current turn starts in _kept
        self._reset_filtered(0)

    def _reset_filtered(self, start: int) -> None:
        # the branch filter, conversions and scrub, over _kept[start:]
        self._filtered_start = start
        self._regular: list[Event] = []
        self._regular_safe: list[Content] = []
        self._regular_ts: list[float] = []
        self._in_order = True  # _regular_ts non-decreasing, no NaN
        self._compactions: list[Event] = []
        # the compactions applied (when there are any)
        self._kept_compactions: list[Event] = []
        self._summaries: list[tuple[Event, Content]] = []
        self._plan: list[_Piece] = []
        self._events: list[Event] = []
        self._safe: list[Content] = []

    def contents(self, events: Sequence[Event]) -> tuple[Content, ...]:
        """The scrubbed contents of a request from ``events``; see the class."""
        if not self._extend(events):
            self._reset()
            self._extend(events)
        assert self._output is not None
        return self._output

    def _extend(self, events: Sequence[Event]) -> bool:
        seen = self._seen
        size = len(seen)
        if size:
            if len(events) < size or not all(map(operator.is_, seen, events)):
                return False
            if len(events) == size and self._output is not None:
                return True
        batch = [e for e in islice(events, size, None) if not e.partial]
        if not size:
            batch = _drop_rewound(batch)
        elif any(e.actions.rewind_before_invocation_id for e in batch):
            return False
        answered = {r.id for e in batch for r in e.function_responses() if r.id}
        if answered & self._pending:
            return False
        self._answered |= answered
        self._seen = events if isinstance(events, tuple) else tuple(events)
        kept = self._kept
        first = len(kept)
        for event in batch:
            answerable = _without_dangling_calls(event, self._answered)
            if answerable is not event:
                long_running = set(event.long_running_tool_ids or ())
                self._pending.update(
                    c.id
                    for c in event.function_calls()
                    if c.id is not None and c.id not in self._answered and c.id not in long_running
                )
            if answerable is not None:
                kept.append(answerable)
        if self._current_turn_only:
            for index in range(first, len(kept)):
                if kept[index].author == "user" or _is_other_agent_reply(self._agent_name, kept[index]):
                    self._turn_start = index
            if self._turn_start is None:
                self._output = ()
                return True
            if self._turn_start != self._filtered_start or first < self._turn_start:
                self._reset_filtered(self._turn_start)
                first = self._turn_start
        self._filter(kept, first)
        self._output = self._arranged()
        return True

    def _filter(self, kept: list[Event], first: int) -> None:
        regular, timestamps = self._regular, self._regular_ts
        appended = len(regular)
        compacted = False
        for event in islice(kept, first, None):
            if event.actions.compaction is not None:
                self._compactions.append(event)
                compacted = True
                continue
            if (
                _is_empty(event)
                or not event_belongs_to_branch(self._branch, event)
                or is_request_confirmation_event(event)
            ):
                continue
            if _is_other_agent_reply(self._agent_name, event):
                foreign = _convert_foreign_event(event)
                if foreign is None:
                    continue
                event = foreign
            timestamp = event.timestamp
            if timestamp != timestamp or (timestamps and timestamp < timestamps[-1]):
                self._in_order = False
            regular.append(event)
            self._regular_safe.append(safe_content(_content_of(event)))
            timestamps.append(timestamp)
        if not self._compactions:
            return
        if compacted or not self._extend_plan(appended):
            self._replan()

    def _extend_plan(self, appended: int) -> bool:
        """The regular events from ``appended`` on added to the plan; False when the plan must be redone."""
        span = self._kept_compactions[-1].actions.compaction
        assert span is not None
        plan = self._plan
        for index in range(appended, len(self._regular)):
            timestamp = self._regular_ts[index]
            if span.start_timestamp <= timestamp <= span.end_timestamp:
                continue  # covered by the latest summary
            if not timestamp > span.end_timestamp:
                return False  # before the latest summary: it moves
            if plan and plan[-1][0] >= 0 and plan[-1][1] == index:
                plan[-1] = (plan[-1][0], index + 1)
            else:
                plan.append((index, index + 1))
            self._events.append(self._regular[index])
            self._safe.append(self._regular_safe[index])
        return True

    def _replan(self) -> None:
        kept = _kept_compactions(self._compactions)
        spans = [k.actions.compaction for k in kept]
        summaries = self._summary_memo()
        self._kept_compactions = kept
        self._summaries = [summaries.get(id(k)) or self._summary(k) for k in kept]
        reverse: list[_Piece] = []  # the walk of _apply_compactions, from the end
        c, e = len(kept) - 1, len(self._regular) - 1
        timestamps = self._regular_ts
        if self._in_order and all(s is not None and _ordered(s) for s in spans):
            while e >= 0 and c >= 0:
                span = spans[c]
                assert span is not None
                after = bisect_right(timestamps, span.end_timestamp, 0, e + 1)  # later than the span: kept
                if after <= e:
                    reverse.append((after, e + 1))
                e = bisect_left(timestamps, span.start_timestamp, 0, after) - 1  # the covered ones skipped
                if e >= 0:
                    reverse.append((-1, c))
                    c -= 1
        else:
            while e >= 0 and c >= 0:
                span = spans[c]
                assert span is not None
                timestamp = timestamps[e]
                if span.start_timestamp <= timestamp <= span.end_timestamp:
                    e -= 1
                elif timestamp > span.end_timestamp:
                    reverse.append((e, e + 1))
                    e -= 1
                else:
                    reverse.append((-1, c))
                    c -= 1
        reverse.extend((-1, i) for i in range(c, -1, -1))
        if e >= 0:
            reverse.append((0, e + 1))
        plan: list[_Piece] = []
        for piece in reversed(reverse):
            if plan and piece[0] >= 0 and plan[-1][0] >= 0 and plan[-1][1] == piece[0]:
                plan[-1] = (plan[-1][0], piece[1])
            else:
                plan.append(piece)
        self._plan = plan
        events: list[Event] = []
        safe: list[Content] = []
        for lo, hi in plan:
            if lo < 0:
                summary, content = self._summaries[hi]
                events.append(summary)
                safe.append(content)
            else:
                events += self._regular[lo:hi]
                safe += self._regular_safe[lo:hi]
        self._events, self._safe = events, safe

    def _summary_memo(self) -> dict[int, tuple[Event, Content]]:
        return {id(k): s for k, s in zip(self._kept_compactions, self._summaries, strict=True)}

    @staticmethod
    def _summary(compaction: Event) -> tuple[Event, Content]:
        summary = _summary_event(compaction)
        return summary, safe_content(_content_of(summary))

    def _arranged(self) -> tuple[Content, ...]:
        events, safe = (self._events, self._safe) if self._compactions else (self._regular, self._regular_safe)
        rearranged = _latest_function_response_rearranged(events)
        if rearranged is None:
            return tuple(safe)
        call_index, merged = rearranged
        return (*safe[: call_index + 1], safe_content(_content_of(merged)))


_LOCK = threading.Lock()
_BUILDERS: OrderedDict[tuple[str, str, str, str, str | None, str], IncrementalContents] = OrderedDict()
_MAX_BUILDERS = 256


def session_request_contents(
    session: Session, *, agent_name: str, branch: str | None, include_contents: IncludeContents = "default"
) -> tuple[Content, ...]:
    """``tuple(map(safe_content, request_contents(session.events, ...)))``, from the session's builder.

    The builder of (the session's app, user and id, ``agent_name``, ``branch``, ``include_contents``)
    continues from the events it saw last (see :class:`IncrementalContents`: it checks they are
    the start of ``session.events``, so a snapshot of another store, an edited or a rewound
    session only costs a full build). The :data:`_MAX_BUILDERS` most recently used are kept.
    While a caller uses a builder it is out of the table: a concurrent caller builds its own.
    """
    key = (*session_key(session), agent_name, branch, include_contents)
    with _LOCK:
        builder = _BUILDERS.pop(key, None)
    if builder is None:
        builder = IncrementalContents(agent_name, branch, include_contents)
    contents = builder.contents(session.events)  # a builder that raised is dropped
    with _LOCK:
        _BUILDERS[key] = builder
        while len(_BUILDERS) > _MAX_BUILDERS:
            _BUILDERS.popitem(last=False)
    return contents
