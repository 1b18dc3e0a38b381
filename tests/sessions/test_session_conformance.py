"""One conformance suite over every session store (memory, SQLite, PostgreSQL), so they cannot drift.

Every test runs against each store through the public ``BaseSessionService`` API only.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from pydantic import JsonValue
from reactivex import operators as ops

from rxllm import Chunk, ConfigurationError, Content, FinishReason, FunctionCall, Part, ToolCallFragment, UsageMetadata
from rxllm.agents import (
    BaseSessionService,
    Event,
    EventActions,
    GetSessionConfig,
    LlmAgent,
    RunConfig,
    Runner,
    Session,
    StreamingMode,
    ToolContext,
)
from rxllm.testing import ScriptedLlm, scripted_turn

from .conftest import StoreFactory


def text_event(
    text: str, *, partial: bool | None = None, delta: dict[str, JsonValue] | None = None, timestamp: float | None = None
) -> Event:
    extra = {} if timestamp is None else {"timestamp": timestamp}
    return Event(
        author="bot",
        partial=partial,
        content=Content(role="model", parts=(Part.from_text(text),)),
        actions=EventActions(state_delta=delta or {}),
        **extra,  # type: ignore[arg-type]
    )


def get(
    service: BaseSessionService, session_id: str, *, app: str = "app", user: str = "u", **config: object
) -> Session:
    cfg = GetSessionConfig(**config) if config else None  # type: ignore[arg-type]
    return service.get_session(app, user, session_id, cfg).run()


def test_create_then_get(service: BaseSessionService) -> None:
    created = service.create_session("app", "u", state={"a": 1, "nested": {"b": [1, 2]}}, session_id="s").run()
    assert (created.id, created.app_name, created.user_id, created.state, created.events) == (
        "s",
        "app",
        "u",
        {"a": 1, "nested": {"b": [1, 2]}},
        (),
    )
    fetched = get(service, "s")
    assert (fetched.id, fetched.state, fetched.events) == ("s", created.state, ())
    generated = service.create_session("app", "u").run()
    assert uuid.UUID(generated.id) and generated.id != "s"


def test_get_of_a_missing_session_completes_empty(service: BaseSessionService) -> None:
    assert service.get_session("app", "u", "missing").pipe(ops.to_list()).run() == []


def test_a_session_is_found_only_under_its_own_app_and_user(service: BaseSessionService) -> None:
    service.create_session("app", "u", session_id="s").run()
    assert service.get_session("app", "other", "s").pipe(ops.to_list()).run() == []
    assert service.get_session("other", "u", "s").pipe(ops.to_list()).run() == []


def test_creating_a_taken_id_fails(service: BaseSessionService) -> None:
    service.create_session("app", "u", session_id="s").run()
    with pytest.raises(ConfigurationError, match="already exists"):
        service.create_session("app", "u", session_id="s").run()
    service.create_session("app", "other-user", session_id="s").run()  # ids are per app and user


def test_append_stores_the_event_and_emits_the_stored_one(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    event = Event(
        author="bot",
        invocation_id="e-1",
        content=Content(
            role="model",
            parts=(Part.from_text("Checking."), Part(function_call=FunctionCall(id="c1", name="f", args={"x": [1]}))),
        ),
        finish_reason=FinishReason.STOP,
        usage_metadata=UsageMetadata(prompt_token_count=3, candidates_token_count=4, total_token_count=7),
        custom_metadata={"k": "v"},
    )
    stored = service.append_event(session, event).run()
    assert stored == event
    fetched = get(service, "s")
    assert fetched.events == (event,)
    assert fetched.last_update_time == event.timestamp


def test_a_partial_event_is_returned_unchanged_and_never_stored(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    partial = text_event("The order", partial=True, delta={"x": 1})
    assert service.append_event(session, partial).run() is partial
    stored = get(service, "s")
    assert stored.events == () and stored.state == {}


def test_state_deltas_apply_and_temp_keys_are_never_stored(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", state={"temp:x": 0, "a": 0}, session_id="s").run()
    assert session.state == {"a": 0}
    stored = service.append_event(session, text_event("hi", delta={"a": 1, "temp:scratch": "x", "b": [1]})).run()
    assert stored.actions.state_delta == {"a": 1, "b": [1]}
    fetched = get(service, "s")
    assert fetched.state == {"a": 1, "b": [1]}
    assert fetched.events[0].actions.state_delta == {"a": 1, "b": [1]}


def test_app_and_user_keys_are_shared_by_scope(service: BaseSessionService) -> None:
    s1 = service.create_session("app", "u", session_id="s1").run()
    service.create_session("app", "u", session_id="s2").run()
    service.create_session("app", "v", session_id="s3").run()
    service.create_session("other", "u", session_id="s4").run()
    service.append_event(s1, text_event("x", delta={"app:tier": "gold", "user:name": "Ada", "own": 1})).run()
    assert get(service, "s1").state == {"app:tier": "gold", "user:name": "Ada", "own": 1}
    assert get(service, "s2").state == {"app:tier": "gold", "user:name": "Ada"}
    assert get(service, "s3", user="v").state == {"app:tier": "gold"}
    assert get(service, "s4", app="other").state == {}
    fresh = service.create_session("app", "u", session_id="s5", state={"user:lang": "en"}).run()
    assert fresh.state == {"app:tier": "gold", "user:name": "Ada", "user:lang": "en"}
    assert get(service, "s2").state == {"app:tier": "gold", "user:name": "Ada", "user:lang": "en"}


def test_num_recent_events_and_after_timestamp(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    for i in range(5):
        service.append_event(session, text_event(f"e{i}", timestamp=1000.0 + i)).run()

    def texts(**config: object) -> list[str]:
        return [e.text() for e in get(service, "s", **config).events]

    assert texts() == ["e0", "e1", "e2", "e3", "e4"]
    assert texts(num_recent_events=2) == ["e3", "e4"]
    assert texts(num_recent_events=0) == []
    assert texts(num_recent_events=9) == ["e0", "e1", "e2", "e3", "e4"]
    assert texts(after_timestamp=1002.0) == ["e2", "e3", "e4"]  # an event exactly at the threshold stays
    assert texts(num_recent_events=4, after_timestamp=1003.0) == ["e3", "e4"]
    assert texts(num_recent_events=2, after_timestamp=1000.0) == ["e3", "e4"]
    assert get(service, "s", num_recent_events=1).state == {}  # filters narrow events, never state


def test_list_sessions_shows_the_users_sessions_without_events(service: BaseSessionService) -> None:
    a = service.create_session("app", "u", session_id="a", state={"k": 1}).run()
    service.create_session("app", "u", session_id="b").run()
    service.create_session("app", "v", session_id="c").run()
    service.append_event(a, text_event("hi")).run()
    listed = service.list_sessions("app", "u").run()
    assert sorted(s.id for s in listed) == ["a", "b"]
    assert all(s.events == () for s in listed)
    assert {s.id: s.state for s in listed} == {"a": {"k": 1}, "b": {}}
    assert service.list_sessions("app", "nobody").run() == []


def test_delete_removes_the_session_and_its_events_but_not_shared_state(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    service.append_event(session, text_event("hi", delta={"user:name": "Ada"})).run()
    assert service.delete_session("app", "u", "s").pipe(ops.to_list()).run() == []
    assert service.get_session("app", "u", "s").pipe(ops.to_list()).run() == []
    service.delete_session("app", "u", "s").pipe(ops.to_list()).run()  # deleting a missing one: no error
    again = service.create_session("app", "u", session_id="s").run()
    assert again.state == {"user:name": "Ada"} and get(service, "s").events == ()


def test_appending_to_a_missing_session_fails(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    service.delete_session("app", "u", "s").pipe(ops.to_list()).run()
    with pytest.raises(ConfigurationError, match="no such session"):
        service.append_event(session, text_event("late")).run()


def test_a_stale_snapshot_appends_by_the_merge_rule(make_store: StoreFactory) -> None:
    """Two writers (two service objects on one store) append through snapshots older than the store."""
    first, second = make_store(), make_store()
    first.create_session("app", "u", session_id="s", state={"base": 0}).run()
    stale_a = first.get_session("app", "u", "s").run()
    stale_b = second.get_session("app", "u", "s").run()
    first.append_event(stale_a, text_event("from a", delta={"a": 1, "same": "a"}, timestamp=2000.0)).run()
    second.append_event(stale_b, text_event("from b", delta={"b": 2, "same": "b"}, timestamp=2001.0)).run()
    first.append_event(stale_a, text_event("a again", delta={"a": 3}, timestamp=2002.0)).run()
    merged = get(second, "s")
    assert [e.text() for e in merged.events] == ["from a", "from b", "a again"]
    assert merged.state == {"base": 0, "a": 3, "b": 2, "same": "b"}  # key-wise; the last commit wins a key
    assert merged.last_update_time == 2002.0


def test_snapshots_are_copies(service: BaseSessionService) -> None:
    service.create_session("app", "u", session_id="s", state={"n": [1]}).run()
    snapshot = get(service, "s")
    snapshot.state["n"] = "changed"
    assert get(service, "s").state == {"n": [1]}


def test_a_stored_delta_is_a_copy_of_the_callers(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    value: list[JsonValue] = [1]
    service.append_event(session, text_event("x", delta={"n": value})).run()
    value.append(2)
    assert get(service, "s").state == {"n": [1]}


def test_concurrent_appends_from_threads_lose_nothing(service: BaseSessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            start.wait()
            for i in range(25):
                service.append_event(session, text_event(f"{n}:{i}", delta={f"w{n}": i, "user:last": n})).run()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stored = get(service, "s")
    assert len(stored.events) == 100
    for n in range(4):
        assert [e.text() for e in stored.events if e.text().startswith(f"{n}:")] == [f"{n}:{i}" for i in range(25)]
        assert stored.state[f"w{n}"] == 24
    last_writer = stored.events[-1].text().split(":")[0]
    assert stored.state["user:last"] == int(last_writer)


def test_persistent_stores_do_io_off_the_callers_thread(store_kind: str, service: BaseSessionService) -> None:
    if store_kind == "memory":
        pytest.skip("the memory store emits synchronously on the subscribing thread by design")
    caller = threading.get_ident()
    seen: list[int] = []
    done = threading.Event()
    service.create_session("app", "u", session_id="s").subscribe(
        on_next=lambda _: seen.append(threading.get_ident()), on_completed=done.set, on_error=lambda _: done.set()
    )
    assert done.wait(30)
    assert seen and seen[0] != caller


def test_every_method_can_be_awaited_from_asyncio(service: BaseSessionService) -> None:
    async def main() -> tuple[Session, Event, Session | None, list[Session], None, Session | None]:
        created = await service.create_session("app", "u", session_id="s")
        stored = await service.append_event(created, text_event("hi", delta={"k": 1}))
        fetched = await service.get_session("app", "u", "s")
        listed = await service.list_sessions("app", "u")
        deleted = await service.delete_session("app", "u", "s")
        missing = await service.get_session("app", "u", "s")
        return created, stored, fetched, listed, deleted, missing

    created, stored, fetched, listed, deleted, missing = asyncio.run(main())
    assert created.id == "s" and stored.text() == "hi"
    assert fetched is not None and fetched.state == {"k": 1} and [s.id for s in listed] == ["s"]
    assert deleted is None and missing is None


def test_an_agent_run_with_tools_and_state_on_every_store(service: BaseSessionService) -> None:
    def remember(item: str, tool_context: ToolContext) -> dict[str, str]:
        """Remember an item."""
        tool_context.state["user:item"] = item
        tool_context.state["temp:scratch"] = "never stored"
        return {"remembered": item}

    model = ScriptedLlm(
        [
            scripted_turn(
                Chunk(text_delta="Noting."),
                Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "remember", '{"item": "tea"}'),)),
            ),
            scripted_turn(Chunk(text_delta="Noted "), Chunk(text_delta="tea.")),
            scripted_turn(Chunk(text_delta="You like tea.")),
        ]
    )
    agent = LlmAgent("bot", model, instruction="Known: {user:item?}", tools=[remember])
    runner = Runner(agent, "app", service)
    service.create_session("app", "u", session_id="s").run()
    question = Content(role="user", parts=(Part.from_text("I like tea"),))
    events = runner.run_async("u", "s", question, RunConfig(streaming_mode=StreamingMode.SSE)).pipe(ops.to_list()).run()
    assert [e.text() for e in events if e.partial] == ["Noting.", "Noted ", "tea."]
    runner.run_async("u", "s", Content(role="user", parts=(Part.from_text("What do I like?"),))).pipe(
        ops.to_list()
    ).run()
    stored = get(service, "s")
    assert [(e.author, e.text()) for e in stored.events] == [
        ("user", "I like tea"),
        ("bot", "Noting."),
        ("bot", ""),
        ("bot", "Noted tea."),
        ("user", "What do I like?"),
        ("bot", "You like tea."),
    ]
    assert stored.events[2].actions.state_delta == {"user:item": "tea"}
    assert stored.state == {"user:item": "tea"}
    system = model.requests[2][0].config.system_instruction  # type: ignore[union-attr]
    assert system is not None and system.text() == 'Known: tea\n\nYou are an agent. Your internal name is "bot".'


def test_a_removed_key_is_removed_from_every_scope(service: BaseSessionService) -> None:
    """Key deletion (``STATE_REMOVED``, taught to ``apply_state_delta`` by the agents runtime) on every store."""
    import rxllm.agents._sessions.state as state_module

    removed = getattr(state_module, "STATE_REMOVED", None)
    if removed is None:
        pytest.skip("rxllm.agents._sessions.state has no STATE_REMOVED marker yet")
    session = service.create_session("app", "u", session_id="s", state={"a": 1, "b": 2}).run()
    service.append_event(session, text_event("set", delta={"app:x": 1, "user:y": 2})).run()
    service.append_event(session, text_event("del", delta={"a": removed, "app:x": removed, "user:y": removed})).run()
    stored = get(service, "s")
    assert stored.state == {"b": 2}
    assert stored.events[-1].actions.state_delta == {"a": removed, "app:x": removed, "user:y": removed}
    assert service.create_session("app", "u", session_id="t").run().state == {}
