"""The history a model sees: which stored events enter an ``LlmRequest``, and how.

The rules are ADK Java's ``flows/llmflows/Contents.java`` (``getContents``), in this order:

1. **Never partials.** A partial event never enters a request (sessions do not store them
   either; the rule holds for any event list given here).
2. **Rewound invocations are gone.** An event whose ``actions.rewind_before_invocation_id``
   names an invocation removes that invocation's events and everything after them up to the
   rewind event itself (ADK Python's rewind).
3. **Ended invocations leave no dangling calls.** A function call that no stored response
   answers -- its run was disposed, failed or ended before the tool answered -- is dropped (an
   event left with nothing is dropped), because a provider rejects a request with an unanswered
   call. Calls named in the event's ``long_running_tool_ids`` are kept: a later user message
   answers them.
4. **Empty events are skipped**: no content, no parts, or only invisible parts (thought text
   and empty text without a thought signature; ``Contents.isPartInvisible``).
   Events holding an ``adk_request_confirmation`` call or response (a tool confirmation asked
   and answered: ``.confirmation``) are skipped too (``Contents.isRequestConfirmationEvent``).
5. **Only the current branch.** An event belongs to the branch ``a.b.c`` when it has no branch,
   the same branch, or an ancestor branch (``a`` or ``a.b``, on a segment boundary:
   ``isEventBelongsToBranch``). Parallel siblings never see each other.
6. **Other agents speak as user-role context** (``convertForeignEvent``): an event authored
   neither by the user nor by the agent being asked becomes a ``user`` content whose parts are
   ``"For context:"``, then ``"[author] said: text"`` per text part, ``"[author] called tool
   `name` with parameters: {json}"`` per call and ``"[author] `name` tool returned result:
   {json}"`` per response; thoughts are never narrated.
7. **A late function response is moved next to its call**
   (``rearrangeEventsForLatestFunctionResponse``): when the last event answers a call made
   earlier than the event before it (a long-running tool resumed by the user), the history is cut
   after the call and the responses to it are merged into one event, the latest answer winning.

**Compaction events** (``actions.compaction``, ADK's events compaction; see
``rxllm.agents._runners.compaction``) are kept whatever their branch; a compaction that a later one
covers is dropped, and each remaining one's summary (a ``model`` content) stands in place of the
events stamped within its range (``Contents.processCompactionEvent``). Stored events are never
changed: only the request shows the summary.

``include_contents="none"`` keeps only the current turn: the events from the latest user message
or other agent's reply onward (``getCurrentTurnContents``), with the same rules applied.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from ..._core.types import Content, Part
from .._sessions.event import Event
from .confirmation import is_request_confirmation_event

__all__ = ["IncludeContents", "event_belongs_to_branch", "request_contents"]

IncludeContents = Literal["default", "none"]
"""ADK's ``LlmAgent.IncludeContents``: the whole (filtered) history, or the current turn only."""


def request_contents(
    events: Sequence[Event],
    *,
    agent_name: str,
    branch: str | None,
    include_contents: IncludeContents = "default",
) -> tuple[Content, ...]:
    """The contents of a request by ``agent_name`` in ``branch``, from the stored ``events``.

    >>> from rxllm import Content, Part
    >>> said = lambda author, text: Event(author=author, content=Content(
    ...     role="user" if author == "user" else "model", parts=(Part.from_text(text),)))
    >>> history = [said("user", "Write a haiku."), said("writer", "Old pond, a frog...")]
    >>> [(c.role, [p.text for p in c.parts]) for c in request_contents(history, agent_name="reviewer", branch=None)]
    [('user', ['Write a haiku.']), ('user', ['For context:', '[writer] said: Old pond, a frog...'])]
    """
    kept = _drop_dangling_calls(_drop_rewound([e for e in events if not e.partial]))
    if include_contents == "none":
        kept = _current_turn(kept, agent_name)
    filtered: list[Event] = []
    compacted = False
    for event in kept:
        if event.actions.compaction is not None:  # kept whatever its branch, for _apply_compactions
            compacted = True
            filtered.append(event)
            continue
        if _is_empty(event) or not event_belongs_to_branch(branch, event) or is_request_confirmation_event(event):
            continue
        if _is_other_agent_reply(agent_name, event):
            foreign = _convert_foreign_event(event)
            if foreign is not None:
                filtered.append(foreign)
        else:
            filtered.append(event)
    if compacted:
        filtered = _apply_compactions(filtered)
    arranged = _rearrange_for_latest_function_response(filtered)
    return tuple(_content_of(event) for event in arranged)


def _apply_compactions(events: list[Event]) -> list[Event]:
    """Summaries in place of the events they cover (ADK Java's ``Contents.processCompactionEvent``).

    A compaction covered by a later one (its range inside the later's) is dropped; every other
    compaction becomes a ``model`` event with its summary, stamped with its end, and stands where
    the events it covers (timestamps from its start to its end, inclusive) stood.
    """
    compactions: list[Event] = []
    regular: list[Event] = []
    for event in events:
        (compactions if event.actions.compaction is not None else regular).append(event)
    kept = _kept_compactions(compactions)
    result: list[Event] = []
    c, e = len(kept) - 1, len(regular) - 1
    while e >= 0 and c >= 0:
        event = regular[e]
        span = kept[c].actions.compaction
        assert span is not None
        if span.start_timestamp <= event.timestamp <= span.end_timestamp:
            e -= 1  # covered by the summary
        elif event.timestamp > span.end_timestamp:
            result.append(event)
            e -= 1
        else:
            result.append(_summary_event(kept[c]))
            c -= 1
    result.extend(_summary_event(kept[i]) for i in range(c, -1, -1))
    result.extend(regular[i] for i in range(e, -1, -1))
    result.reverse()
    return result


def _kept_compactions(compactions: Sequence[Event]) -> list[Event]:
    """The compactions no later one covers (its range inside the later's), in their order."""
    kept: list[Event] = []
    for event in reversed(compactions):  # the later compactions win
        span = event.actions.compaction
        assert span is not None
        last = kept[-1].actions.compaction if kept else None
        if last is None or not (
            span.start_timestamp >= last.start_timestamp and span.end_timestamp <= last.end_timestamp
        ):
            kept.append(event)
    kept.reverse()
    return kept


def _summary_event(event: Event) -> Event:
    span = event.actions.compaction
    assert span is not None
    return event.model_copy(
        update={"timestamp": span.end_timestamp, "author": "model", "content": span.compacted_content}
    )


def event_belongs_to_branch(branch: str | None, event: Event) -> bool:
    """Whether ``event`` is visible from ``branch`` (``Contents.isEventBelongsToBranch``)."""
    if not branch or not event.branch:
        return True
    return branch == event.branch or branch.startswith(event.branch + ".")


def _content_of(event: Event) -> Content:
    content = event.content
    assert content is not None  # _is_empty dropped the others
    if content.role is None:
        content = content.model_copy(update={"role": "user" if event.author == "user" else "model"})
    return content


def _is_other_agent_reply(agent_name: str, event: Event) -> bool:
    return bool(agent_name) and event.author not in (agent_name, "user")


def _is_part_invisible(part: Part) -> bool:
    fields = part.__dict__  # (read once: each attribute read of a pydantic model is a slow lookup)
    if fields["function_call"] is not None or fields["function_response"] is not None:
        return False
    if fields["thought_signature"]:
        return False
    return bool(fields["thought"]) or not (fields["text"] or fields["inline_data"] is not None)


def _is_empty(event: Event) -> bool:
    content = event.content
    return content is None or not content.parts or all(_is_part_invisible(p) for p in content.parts)


def _drop_rewound(events: list[Event]) -> list[Event]:
    kept: list[Event] = []
    index = len(events) - 1
    while index >= 0:
        event = events[index]
        target = event.actions.rewind_before_invocation_id
        if target:
            for earlier in range(index):
                if events[earlier].invocation_id == target:
                    index = earlier
                    break
        else:
            kept.append(event)
        index -= 1
    kept.reverse()
    return kept


def _drop_dangling_calls(events: list[Event]) -> list[Event]:
    answered = {r.id for e in events for r in e.function_responses() if r.id}
    kept: list[Event] = []
    for event in events:
        answerable = _without_dangling_calls(event, answered)
        if answerable is not None:
            kept.append(answerable)
    return kept


def _without_dangling_calls(event: Event, answered: set[str]) -> Event | None:
    """``event`` without its calls no id in ``answered`` answers (long-running ones kept); None when nothing is left."""
    content = event.content
    if content is None or not event.function_calls():
        return event
    long_running = set(event.long_running_tool_ids or ())
    parts = tuple(
        p
        for p in content.parts
        if p.function_call is None
        or p.function_call.id is None
        or p.function_call.id in answered
        or p.function_call.id in long_running
    )
    if len(parts) == len(content.parts):
        return event
    if parts:
        return event.model_copy(update={"content": content.model_copy(update={"parts": parts})})
    return None


def _current_turn(events: list[Event], agent_name: str) -> list[Event]:
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.author == "user" or _is_other_agent_reply(agent_name, event):
            return events[index:]
    return []


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _convert_foreign_event(event: Event) -> Event | None:
    content = event.content
    assert content is not None
    author = event.author
    parts = [Part.from_text("For context:")]
    for part in content.parts:
        if part.thought:
            continue
        if part.text and part.text.strip():
            parts.append(Part.from_text(f"[{author}] said: {part.text}"))
        elif part.function_call is not None:
            call = part.function_call
            parts.append(Part.from_text(f"[{author}] called tool `{call.name}` with parameters: {_json(call.args)}"))
        elif part.function_response is not None:
            response = part.function_response
            parts.append(
                Part.from_text(f"[{author}] `{response.name}` tool returned result: {_json(response.response)}")
            )
        elif part.inline_data is not None:
            parts.append(part)
    if len(parts) == 1:
        return None
    return event.model_copy(update={"author": "user", "content": Content(role="user", parts=tuple(parts))})


def _response_ids(event: Event) -> set[str]:
    return {r.id for r in event.function_responses() if r.id}


def _call_ids(event: Event) -> set[str]:
    return {c.id for c in event.function_calls() if c.id}


def _rearrange_for_latest_function_response(events: list[Event]) -> list[Event]:
    rearranged = _latest_function_response_rearranged(events)
    if rearranged is None:
        return events
    call_index, merged = rearranged
    return [*events[: call_index + 1], merged]


def _latest_function_response_rearranged(events: Sequence[Event]) -> tuple[int, Event] | None:
    """Where the history is cut (the index of the call the last event answers) and the merged
    responses that follow it; None when the last event needs no moving."""
    if len(events) < 2:
        return None
    latest = events[-1]
    ids = _response_ids(latest)
    if not ids or _call_ids(events[-2]) & ids:
        return None
    call_index = -1
    for index in range(len(events) - 3, -1, -1):
        calls = _call_ids(events[index])
        if calls & ids:
            call_index = index
            ids |= calls
            break
    if call_index < 0:
        return None  # an answer to a call no longer in the history: leave it where it is
    responses = [e for e in events[call_index + 1 : -1] if _response_ids(e) & ids]
    responses.append(latest)
    return call_index, _merge_function_responses(responses)


def _merge_function_responses(events: list[Event]) -> Event:
    base = events[0]
    if len(events) == 1:
        return base
    assert base.content is not None
    parts = list(base.content.parts)
    position = {p.function_response.id: i for i, p in enumerate(parts) if p.function_response is not None}
    for event in events[1:]:
        assert event.content is not None
        for part in event.content.parts:
            response = part.function_response
            if response is not None and response.id in position:
                parts[position[response.id]] = part
            else:
                if response is not None and response.id:
                    position[response.id] = len(parts)
                parts.append(part)
    return base.model_copy(update={"content": base.content.model_copy(update={"parts": tuple(parts)})})
