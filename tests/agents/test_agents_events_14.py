"""The flow and the store read events and responses off their ``__dict__`` (one slow attribute
lookup, not one per field) and build a final's event without validating it again, its
``custom_metadata`` copied as validation copies it: the same events as the validated path, for
partials, finals, errors and function calls, and the fast paths are the ones taken."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import Chunk, Content, FinishReason, FunctionCall, LlmResponse, Part, ToolCallFragment, UsageMetadata
from rxllm.agents import (
    Event,
    EventActions,
    InMemoryRunner,
    InMemorySessionService,
    LlmAgent,
    RunConfig,
    Session,
    StreamingMode,
)
from rxllm.agents._flows import flow
from rxllm.agents._sessions import base as sessions_base
from rxllm.testing import ScriptedLlm, scripted_turn

from .test_agents_flow_fast_paths import _same as _same_event
from .test_agents_flow_fast_paths import _slow as _validated

USAGE = UsageMetadata(prompt_token_count=3, candidates_token_count=4, total_token_count=7)


class _Ctx:
    invocation_id = "e-1"
    branch = "root.support"
    total_usage_metadata = USAGE

    def __init__(self) -> None:
        self.usages: list[object] = []

    def add_usage(self, usage: object) -> None:
        self.usages.append(usage)


class _Agent:
    name = "support"


def _same(fast: Event, original: Event) -> None:
    assert type(fast) is type(original) is Event
    _same_event(fast, original)


def _call_part(call_id: str = "c1") -> Part:
    return Part(function_call=FunctionCall(id=call_id, name="get_order", args={"order_id": "A17"}))


_TEXT = Content(role="model", parts=(Part.from_text("Let me look that up."),))
_WITH_CALL = Content(role="model", parts=(Part.from_text("Let me look that up."), _call_part()))
# (response, the total its event carries: a final without calls and an error end the run)
CASES: list[tuple[str, LlmResponse, UsageMetadata | None]] = [
    ("partial", LlmResponse(content=_TEXT, partial=True), None),
    ("partial call", LlmResponse(content=Content(role="model", parts=(_call_part(),)), partial=True), None),
    ("final", LlmResponse(content=_TEXT, finish_reason=FinishReason.STOP, usage_metadata=USAGE), USAGE),
    (
        "final with metadata",
        LlmResponse(
            content=_TEXT,
            finish_reason=FinishReason.STOP,
            usage_metadata=USAGE,
            model_version="m-1",
            response_id="r-1",
            custom_metadata={"finish_reason": "stop"},
        ),
        USAGE,
    ),
    (
        "function call with metadata",
        LlmResponse(
            content=_WITH_CALL,
            finish_reason=FinishReason.STOP,
            usage_metadata=USAGE,
            turn_complete=True,
            custom_metadata={"finish_reason": "tool_calls", "n": 2, "f": 0.5, "b": True, "none": None},
        ),
        None,
    ),
    (
        "nested metadata",
        LlmResponse(content=_TEXT, custom_metadata={"k": [1, {"deep": ["x", None]}], "o": {"p": {}}}),
        USAGE,
    ),
    (
        "error",
        LlmResponse(error_code=FinishReason("rate_limited"), error_message="slow down", custom_metadata={"r": "429"}),
        USAGE,
    ),
]


def _events_built(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    """The events the flow's fast path (``_event_of``) builds from now on, in order."""
    built: list[Event] = []
    event_of = flow._event_of

    def spy(*args: Any) -> Event:
        event = event_of(*args)
        built.append(event)
        return event

    monkeypatch.setattr(flow, "_event_of", spy)
    return built


@pytest.mark.parametrize(("name", "response", "total"), CASES, ids=[case[0] for case in CASES])
def test_the_event_of_a_response_is_the_validated_one_and_built_without_validation(
    name: str, response: LlmResponse, total: UsageMetadata | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _events_built(monkeypatch)
    ctx = _Ctx()
    event = flow._to_event(_Agent(), ctx, flow._Step(), response)  # type: ignore[arg-type]
    assert built == [event] and built[0] is event  # the fast path built it
    _same(event, _validated(response, total, None))
    assert ctx.usages == ([] if response.partial else [response.usage_metadata])
    if response.custom_metadata is not None:  # a copy, as validation makes, containers included
        assert event.custom_metadata == response.custom_metadata
        assert event.custom_metadata is not response.custom_metadata
        for key, value in response.custom_metadata.items():
            if isinstance(value, dict | list):
                assert event.custom_metadata[key] is not value  # type: ignore[index]


class _Level(IntEnum):
    HIGH = 2


@pytest.mark.parametrize(
    "metadata",
    [
        {"level": _Level.HIGH},  # (not a plain JSON value: validation decides what it becomes)
        {"pair": ("a", 1)},
        {1: "not a str key"},
    ],
    ids=["int-enum", "tuple", "int-key"],
)
def test_metadata_that_is_not_plain_json_is_validated(
    metadata: dict[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a response built without validation may hold them: its event is validated, as before
    response = LlmResponse.model_construct(content=_TEXT, custom_metadata=metadata)
    built: list[object] = []
    monkeypatch.setattr(flow, "_event_of", lambda *args: built.append(args))
    try:
        expected: Event | Exception = _validated(response, USAGE, None)
    except Exception as exc:  # (what validation raises, the flow raises too)
        expected = exc
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            flow._to_event(_Agent(), _Ctx(), flow._Step(), response)  # type: ignore[arg-type]
    else:
        _same(flow._to_event(_Agent(), _Ctx(), flow._Step(), response), expected)  # type: ignore[arg-type]
    assert built == []


def test_a_subclass_of_llm_response_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    class Mine(LlmResponse):
        pass

    response = Mine(content=_TEXT, custom_metadata={"finish_reason": "stop"})
    monkeypatch.setattr(flow, "_event_of", lambda *args: pytest.fail("the fast path took a subclass"))
    event = flow._to_event(_Agent(), _Ctx(), flow._Step(), response)  # type: ignore[arg-type]
    _same(event, _validated(response, USAGE, None))


def test_a_content_subclass_answers_its_own_function_calls() -> None:
    class NoCalls(Content):
        def function_calls(self) -> list[FunctionCall]:
            return []

    with_call = NoCalls(role="model", parts=(_call_part(),))
    assert flow._has_function_call(with_call) is False
    assert flow._has_function_call(Content(role="model", parts=(_call_part(),))) is True
    assert flow._has_function_call(_TEXT) is False and flow._has_function_call(None) is False


def test_long_running_calls_are_named_on_the_final_only() -> None:
    class Slow:
        is_long_running = True

    step = flow._Step()
    step.tools = {"get_order": Slow()}  # type: ignore[dict-item]
    final = LlmResponse(content=Content(role="model", parts=(_call_part("c1"), Part.from_text("x"), _call_part("c2"))))
    event = flow._to_event(_Agent(), _Ctx(), step, final)  # type: ignore[arg-type]
    assert event.long_running_tool_ids == ("c1", "c2")
    _same(event, _validated(final, None, ("c1", "c2")))
    partial = final.model_copy(update={"partial": True})
    assert flow._to_event(_Agent(), _Ctx(), step, partial).long_running_tool_ids is None  # type: ignore[arg-type]


def get_order(order_id: str) -> dict[str, str]:
    """Look an order up.

    Args:
        order_id: The order's id.
    """
    return {"order_id": order_id, "status": "shipped"}


def _a17_turns() -> list[list[LlmResponse]]:
    return [
        scripted_turn(
            Chunk(text_delta="Let me look "),
            Chunk(text_delta="that up."),
            Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", "get_order", '{"order_'),)),
            Chunk(
                tool_call_fragments=(ToolCallFragment(0, None, None, 'id": "A17"}'),),
                finish_reason=FinishReason.STOP,
                raw_finish_reason="tool_calls",
                usage=USAGE,
            ),
        ),
        scripted_turn(
            Chunk(text_delta="Order A17 "),
            Chunk(text_delta="shipped.", finish_reason=FinishReason.STOP, raw_finish_reason="stop", usage=USAGE),
        ),
    ]


def _run_a17() -> tuple[list[Event], tuple[Event, ...]]:
    runner = InMemoryRunner(LlmAgent("support", ScriptedLlm(_a17_turns()), tools=[get_order]), app_name="shop")
    runner.session_service.create_session("shop", "u", session_id="s").run()
    sse = RunConfig(streaming_mode=StreamingMode.SSE)
    events: list[Event] = runner.run_async("u", "s", "Where is A17?", sse).pipe(ops.to_list()).run()
    session = runner.session_service.get_session("shop", "u", "s").run()
    return events, session.events


_PER_RUN = {"id", "timestamp", "invocation_id"}  # (fresh in every run)


def _comparable(event: Event) -> tuple[Any, ...]:
    return (
        type(event),
        event.model_fields_set,
        event.model_dump(exclude=_PER_RUN),
        event.model_dump(exclude_unset=True, exclude=_PER_RUN),
    )


def test_a_turn_gives_the_events_of_the_validated_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_events, fast_stored = _run_a17()
    finals = [e for e in fast_events if not e.partial]
    assert [e.custom_metadata for e in finals if e.author == "support" and e.content and e.content.role == "model"] == [
        {"finish_reason": "tool_calls"},
        {"finish_reason": "stop"},
    ]
    monkeypatch.setattr(flow, "_FAST_EVENT", False)  # every response event validated
    slow_events, slow_stored = _run_a17()
    assert [_comparable(e) for e in fast_events] == [_comparable(e) for e in slow_events]
    assert [_comparable(e) for e in fast_stored] == [_comparable(e) for e in slow_stored]
    assert len({e.id for e in fast_events}) == len(fast_events)


def test_a_turn_builds_every_response_event_without_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _events_built(monkeypatch)
    events, _ = _run_a17()
    model_events = [e for e in events if e.content is not None and e.content.role == "model"]
    finals = [e for e in model_events if not e.partial]
    assert len(finals) == 2 and all(e.custom_metadata for e in finals)  # (copied, not validated)
    assert len(model_events) > len(finals)  # and the partials
    assert [e.id for e in built] == [e.id for e in model_events]


def test_the_store_reads_the_event_it_stores_as_before() -> None:
    service = InMemorySessionService()
    session = service.create_session("shop", "u", session_id="s").run()
    event = Event(
        author="support",
        error_message="failed with key sk-abcdefghijklmnopqrstuvwxyz123456",
        actions=EventActions(state_delta={"kept": 1, "temp:dropped": 2}),
    )
    stored = service.append_event(session, event).run()
    assert stored.id == event.id and stored.timestamp == event.timestamp
    assert stored.actions.state_delta == {"kept": 1}
    assert stored.error_message == sessions_base.redact_secrets(event.error_message or "")
    again = service.get_session("shop", "u", "s").run()
    assert again.events == (stored,) and again.state == {"kept": 1}
    assert again.last_update_time == event.timestamp
    partial = Event(author="support", partial=True, actions=EventActions(state_delta={"x": 1}))
    assert service.append_event(session, partial).run() is partial
    assert service.get_session("shop", "u", "s").run().state == {"kept": 1}


def test_a_session_without_its_ids_fails_as_reading_them_fails() -> None:
    service = InMemorySessionService()
    broken = Session.model_construct(id="s", user_id="u")  # (no app_name: built without validation)
    with pytest.raises(AttributeError, match="app_name"):
        service._append_now(broken, Event(author="a"))


# --- reads off __dict__: the same answers as the attribute reads they replace ---------------------


def _final_as_adk_defines_it(event: Event) -> bool:
    """``Event.is_final_response`` as it was written (every value read through its attribute)."""
    if event.actions.skip_summarization or event.long_running_tool_ids:
        return True
    return (
        not event.function_calls()
        and not event.function_responses()
        and not event.partial
        and not event.has_trailing_code_execution_result()
    )


def _events() -> list[Event]:
    from rxllm import FunctionResponse
    from rxllm._core.genai_types import CodeExecutionResult

    response = Part(function_response=FunctionResponse(id="c1", name="get_order", response={"ok": True}))
    code = Part(code_execution_result=CodeExecutionResult(output="2"))
    text = Part.from_text("hi")
    return [
        Event(author="a"),
        Event(author="a", content=Content(role="model", parts=())),
        Event(author="a", content=_TEXT),
        Event(author="a", content=_TEXT, partial=True),
        Event(author="a", partial=False, content=_TEXT),
        Event(author="a", content=_WITH_CALL),
        Event(author="a", content=_WITH_CALL, long_running_tool_ids=("c1",)),
        Event(author="a", content=Content(role="user", parts=(response,))),
        Event(
            author="a", content=Content(role="user", parts=(response,)), actions=EventActions(skip_summarization=True)
        ),
        Event(author="a", content=Content(role="model", parts=(text, code))),
        Event(author="a", content=Content(role="model", parts=(code, text))),
        Event(author="a", partial=True),
    ]


def test_is_final_response_answers_as_adk_defines_it(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events()
    expected = [_final_as_adk_defines_it(e) for e in events]
    assert expected == [True, True, True, False, True, False, True, False, True, False, True, False]

    def not_called(self: object) -> list[FunctionCall]:
        raise AssertionError("the attribute path was taken")

    monkeypatch.setattr(Event, "function_calls", not_called)
    monkeypatch.setattr(Event, "function_responses", not_called)
    assert [e.is_final_response() for e in events] == expected  # (read off __dict__)


def test_is_final_response_of_a_subclass_asks_its_own_methods() -> None:
    class NoCalls(Event):
        def function_calls(self) -> list[FunctionCall]:
            return []

    class NoCallsContent(Content):
        def function_calls(self) -> list[FunctionCall]:
            return []

    assert NoCalls(author="a", content=_WITH_CALL).is_final_response() is True
    assert Event(author="a", content=NoCallsContent(role="model", parts=_WITH_CALL.parts)).is_final_response() is True
    assert Event(author="a", content=_WITH_CALL).is_final_response() is False


def test_part_and_confirmation_checks_answer_as_the_attribute_reads() -> None:
    from rxllm import Blob, FunctionResponse
    from rxllm.agents._flows import confirmation, contents

    def invisible(part: Part) -> bool:
        if part.function_call is not None or part.function_response is not None:
            return False
        if part.thought_signature:
            return False
        return bool(part.thought) or not (part.text or part.inline_data is not None)

    parts = [
        Part.from_text("x"),
        Part(text=""),
        Part(text="t", thought=True),
        Part(thought=True, thought_signature=b"s"),
        Part(inline_data=Blob(mime_type="image/png", data=b"1")),
        _call_part(),
        Part(function_response=FunctionResponse(id="c", name="f", response={})),
        Part(),
    ]
    assert [contents._is_part_invisible(p) for p in parts] == [invisible(p) for p in parts]
    name = confirmation.REQUEST_CONFIRMATION_FUNCTION_CALL_NAME
    asked = Part(function_call=FunctionCall(id="r", name=name, args={}))
    answered = Part(function_response=FunctionResponse(id="r", name=name, response={}))
    for content, expected in [
        (None, False),
        (_WITH_CALL, False),
        (Content(role="model", parts=(Part.from_text("x"), asked)), True),
        (Content(role="user", parts=(answered,)), True),
    ]:
        assert confirmation.is_request_confirmation_event(Event(author="a", content=content)) is expected


def test_session_key_reads_the_ids() -> None:
    session = Session(id="s", app_name="shop", user_id="u")
    assert sessions_base.session_key(session) == ("shop", "u", "s")
    with pytest.raises(AttributeError, match="app_name"):
        sessions_base.session_key(Session.model_construct(id="s", user_id="u"))


def test_an_events_calls_and_responses_are_its_contents() -> None:
    class Mine(Content):
        def function_calls(self) -> list[FunctionCall]:
            return []

        def function_responses(self) -> list[Any]:
            return ["mine"]

    for event in _events():
        content = event.content
        assert event.function_calls() == (content.function_calls() if content is not None else [])
        assert event.function_responses() == (content.function_responses() if content is not None else [])
    own = Event(author="a", content=Mine(role="model", parts=_WITH_CALL.parts))
    assert own.function_calls() == [] and own.function_responses() == ["mine"]
    calls = Event(author="a", content=_WITH_CALL).function_calls()
    assert calls == [_WITH_CALL.parts[1].function_call] and calls[0] is _WITH_CALL.parts[1].function_call


def test_a_prevalidated_event_keeps_the_actions_it_is_given_and_makes_them_otherwise() -> None:
    from rxllm.agents._sessions.event import prevalidated_event

    actions = EventActions(state_delta={"k": 1}, skip_summarization=True)
    given = prevalidated_event({"author": "a", "content": _TEXT, "actions": actions})
    assert given.actions is actions
    _same(given, Event(author="a", content=_TEXT, actions=actions))
    one, two = prevalidated_event({"author": "a"}), prevalidated_event({"author": "a"})
    assert one.actions == EventActions() and one.actions is not two.actions and one.id != two.id
    _same(one, Event(author="a"))


def test_calls_without_ids_get_ids_whoever_says_there_are_none() -> None:
    class Quiet(LlmResponse):
        def function_calls(self) -> list[FunctionCall]:
            return []

    class QuietContent(Content):
        def function_calls(self) -> list[FunctionCall]:
            return []

    call = Part(function_call=FunctionCall(name="get_order", args={}))
    for response in [
        Quiet(content=Content(role="model", parts=(call,))),
        LlmResponse(content=QuietContent(role="model", parts=(call,))),
        LlmResponse(content=Content(role="model", parts=(call,))),
    ]:
        event = flow._to_event(_Agent(), _Ctx(), flow._Step(), response)  # type: ignore[arg-type]
        assert event.content is not None
        (part,) = event.content.parts
        assert part.function_call is not None and part.function_call.id  # (a generated one)
    text_final = LlmResponse(content=_TEXT)
    assert flow._to_event(_Agent(), _Ctx(), flow._Step(), text_final).content is _TEXT  # type: ignore[arg-type]
