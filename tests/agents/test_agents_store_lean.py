"""The session store's lean paths keep their guarantees: event and invocation ids are version-4
UUID strings, unique across threads, across a fork and whatever :mod:`random` is seeded with;
a lone surrogate anywhere in a stored event is replaced, in whichever field it sits."""

from __future__ import annotations

import os
import random
import threading
import uuid
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import Chunk, Content, FunctionCall, FunctionResponse, Part
from rxllm._tools import new_invocation_id
from rxllm.agents import Event, EventActions, InMemoryRunner, LlmAgent
from rxllm.agents._sessions.base import event_to_store
from rxllm.testing import ScriptedLlm, scripted_turn

BAD, GOOD = "caf\udce9", "caf\ufffd"


def _is_uuid4(text: str) -> bool:
    parsed = uuid.UUID(text)
    return parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text and len(text) == 36


def test_event_ids_are_version_4_uuid_strings_and_unique() -> None:
    ids = [Event.new_id() for _ in range(5000)] + [Event(author="u").id for _ in range(500)]
    assert len(set(ids)) == len(ids)
    assert all(_is_uuid4(i) for i in ids)
    invocation = new_invocation_id()
    assert invocation.startswith("e-") and _is_uuid4(invocation[2:])


def test_threads_never_share_an_id() -> None:
    made: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def make(into: list[str]) -> None:
        start.wait()
        into.extend(Event.new_id() for _ in range(3000))

    threads = [threading.Thread(target=make, args=(into,)) for into in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for ids in made for i in ids]
    assert len(every) == 12000 and len(set(every)) == 12000


def test_seeding_random_does_not_repeat_ids() -> None:
    state = random.getstate()
    try:
        random.seed(7)
        first = [Event.new_id() for _ in range(200)]
        random.seed(7)
        second = [Event.new_id() for _ in range(200)]
    finally:
        random.setstate(state)
    assert not set(first) & set(second)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    Event.new_id()  # the parent holds ids made ready before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, "\n".join(Event.new_id() for _ in range(100)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split("\n")
    os.waitpid(pid, 0)
    parent = [Event.new_id() for _ in range(100)]
    assert len(child) == 100 and all(_is_uuid4(i) for i in child)
    assert not set(child) & set(parent)


def test_the_ids_of_a_run_are_unique_uuid4s() -> None:
    model = ScriptedLlm([scripted_turn(Chunk(text_delta="Hi.")), scripted_turn(Chunk(text_delta="Again."))])
    runner = InMemoryRunner(LlmAgent("bot", model), app_name="app")
    runner.session_service.create_session("app", "u", session_id="s").run()
    question = Content(role="user", parts=(Part.from_text("hello"),))
    events = runner.run_async("u", "s", question).pipe(ops.to_list()).run()
    events += runner.run_async("u", "s", question).pipe(ops.to_list()).run()
    stored = runner.session_service.get_session("app", "u", "s").run().events
    ids = [e.id for e in stored]
    assert len(stored) == 4 and len(set(ids)) == 4 and all(_is_uuid4(i) for i in ids)
    assert {e.id for e in events} <= set(ids)
    invocations = {e.invocation_id for e in stored}
    assert len(invocations) == 2 and all(i.startswith("e-") and _is_uuid4(i[2:]) for i in invocations)


def _part_with(where: str, text: str) -> Part:
    if where == "call":
        return Part(function_call=FunctionCall(id="c1", name="f", args={"q": [text, {"k": 1}]}))
    if where == "response":
        return Part(function_response=FunctionResponse(id="c1", name="f", response={"rows": [{text: text}]}))
    return Part.from_text(text)


@pytest.mark.parametrize("where", ["text", "call", "response", "state", "metadata", "error"])
def test_a_lone_surrogate_anywhere_in_a_stored_event_is_replaced(where: str) -> None:
    def event(text: str) -> Event:
        values: dict[str, Any] = {"author": "bot"}
        if where in ("text", "call", "response"):
            values["content"] = Content(role="model", parts=(Part.from_text("fine"), _part_with(where, text)))
        elif where == "state":
            values["actions"] = EventActions(state_delta={"note": {"deep": [text]}})
        elif where == "metadata":
            values["custom_metadata"] = {"tag": text}
        else:
            values["error_message"] = text
        return Event(**values)

    bad = event(BAD)
    stored = event_to_store(bad)
    assert stored is not bad
    assert stored.model_dump() == event(GOOD).model_copy(update={"id": bad.id, "timestamp": bad.timestamp}).model_dump()
    clean = event("naïve 🎉")
    assert event_to_store(clean) is clean
