"""InMemorySessionService: the partial check, state deltas, snapshots, thread safety."""

from __future__ import annotations

import threading

import pytest
from pydantic import JsonValue
from reactivex import operators as ops

from rxllm import ConfigurationError, Content, Part
from rxllm.agents import Event, EventActions, InMemorySessionService, Session


def text_event(text: str, *, partial: bool | None = None, delta: dict[str, JsonValue] | None = None) -> Event:
    return Event(
        author="bot",
        partial=partial,
        content=Content(role="model", parts=(Part.from_text(text),)),
        actions=EventActions(state_delta=delta or {}),
    )


@pytest.fixture
def service() -> InMemorySessionService:
    return InMemorySessionService()


def test_create_and_get(service: InMemorySessionService) -> None:
    created = service.create_session("app", "u", state={"a": 1}, session_id="s").run()
    assert (created.id, created.app_name, created.user_id, created.state, created.events) == (
        "s",
        "app",
        "u",
        {"a": 1},
        (),
    )
    assert service.get_session("app", "u", "s").run() == created
    generated = service.create_session("app", "u").run()
    assert len(generated.id) == 36 and generated.id != "s"


def test_get_of_a_missing_session_completes_empty(service: InMemorySessionService) -> None:
    assert service.get_session("app", "u", "missing").pipe(ops.to_list()).run() == []


def test_creating_a_taken_id_fails(service: InMemorySessionService) -> None:
    service.create_session("app", "u", session_id="s").run()
    with pytest.raises(ConfigurationError, match="already exists"):
        service.create_session("app", "u", session_id="s").run()


def test_a_partial_event_is_returned_unchanged_and_not_stored(service: InMemorySessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    partial = text_event("The order", partial=True, delta={"x": 1})
    assert service.append_event(session, partial).run() is partial
    stored = service.get_session("app", "u", "s").run()
    assert stored.events == () and stored.state == {}


def test_append_stores_and_applies_the_state_delta(service: InMemorySessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    event = text_event("The order ships Tuesday", delta={"x": 1, "temp:t": 2, "app:a": 3, "user:u": 4})
    stored_event = service.append_event(session, event).run()
    assert stored_event.actions.state_delta == {"x": 1, "app:a": 3, "user:u": 4}  # temp: never persisted
    stored = service.get_session("app", "u", "s").run()
    assert stored.events == (stored_event,)
    assert stored.state == {"x": 1, "app:a": 3, "user:u": 4}
    assert stored.last_update_time == event.timestamp
    other_user_session = service.create_session("app", "someone-else").run()
    assert other_user_session.state == {"app:a": 3}
    same_user_session = service.create_session("app", "u").run()
    assert same_user_session.state == {"app:a": 3, "user:u": 4}


def test_appending_to_a_missing_session_fails(service: InMemorySessionService) -> None:
    ghost = Session(id="ghost", app_name="app", user_id="u")
    with pytest.raises(ConfigurationError, match="no such session"):
        service.append_event(ghost, text_event("hi")).run()


def test_snapshots_do_not_change_under_later_appends_or_mutation(service: InMemorySessionService) -> None:
    session = service.create_session("app", "u", state={"n": [1]}, session_id="s").run()
    before = service.get_session("app", "u", "s").run()
    service.append_event(session, text_event("one", delta={"n": [1, 2]})).run()
    assert before.events == () and before.state == {"n": [1]}
    snapshot = service.get_session("app", "u", "s").run()
    snapshot.state["n"].append(99)  # type: ignore[union-attr]
    assert service.get_session("app", "u", "s").run().state == {"n": [1, 2]}
    with pytest.raises(Exception, match="frozen"):
        snapshot.events = ()  # type: ignore[misc]


def test_list_and_delete(service: InMemorySessionService) -> None:
    first = service.create_session("app", "u", session_id="a").run()
    service.create_session("app", "u", session_id="b").run()
    service.create_session("app", "v", session_id="c").run()
    service.append_event(first, text_event("hi")).run()
    listed = service.list_sessions("app", "u").run()
    assert sorted(s.id for s in listed) == ["a", "b"]
    assert all(s.events == () for s in listed)  # listings carry no events
    assert service.delete_session("app", "u", "a").pipe(ops.to_list()).run() == []
    assert service.get_session("app", "u", "a").pipe(ops.to_list()).run() == []
    assert service.delete_session("app", "u", "a").pipe(ops.to_list()).run() == []  # idempotent


def test_methods_are_cold(service: InMemorySessionService) -> None:
    service.create_session("app", "u", session_id="s")
    assert service.get_session("app", "u", "s").pipe(ops.to_list()).run() == []


def test_concurrent_appends_are_all_stored(service: InMemorySessionService) -> None:
    session = service.create_session("app", "u", session_id="s").run()
    threads_count, per_thread = 8, 200
    start = threading.Barrier(threads_count)

    def worker(n: int) -> None:
        start.wait()
        for i in range(per_thread):
            service.append_event(session, text_event(f"{n}-{i}", delta={f"k{n}": i})).run()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    stored = service.get_session("app", "u", "s").run()
    assert len(stored.events) == threads_count * per_thread
    assert stored.state == {f"k{n}": per_thread - 1 for n in range(threads_count)}
    for n in range(threads_count):  # each thread's events kept their order
        mine = [e.text() for e in stored.events if e.text().startswith(f"{n}-")]
        assert mine == [f"{n}-{i}" for i in range(per_thread)]
