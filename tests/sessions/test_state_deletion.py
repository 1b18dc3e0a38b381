"""State deletion persists in every session store (memory, SQLite, PostgreSQL): ``STATE_REMOVED``
in a stored event's ``state_delta`` removes the key from its scope, and a fresh store reading the
same database agrees."""

from __future__ import annotations

from rxllm.agents import STATE_REMOVED, BaseSessionService, Event, EventActions


def test_a_removed_key_is_gone_in_every_scope(service: BaseSessionService) -> None:
    session = service.create_session(
        "app", "u1", state={"draft": "x", "keep": 1, "user:nick": "ada", "app:theme": "dark"}, session_id="s1"
    ).run()
    delta = {"draft": STATE_REMOVED, "user:nick": STATE_REMOVED, "app:theme": STATE_REMOVED, "new": True}
    service.append_event(session, Event(author="bot", actions=EventActions(state_delta=delta))).run()
    state = service.get_session("app", "u1", "s1").run().state
    assert state == {"keep": 1, "new": True}
    stored = service.get_session("app", "u1", "s1").run().events[-1]
    assert stored.actions.state_delta == delta  # the event keeps the marker: replaying it deletes again
