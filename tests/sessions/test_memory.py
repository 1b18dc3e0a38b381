"""Memory: keyword search over sessions added to memory, ToolContext.search_memory and load_memory in a run."""

from __future__ import annotations

import pytest
from reactivex import operators as ops

from rxllm import Chunk, Content, Part, ToolCallFragment
from rxllm.agents import (
    Event,
    InMemoryMemoryService,
    InMemoryRunner,
    InMemorySessionService,
    LlmAgent,
    Runner,
    Session,
    ToolContext,
    load_memory,
)
from rxllm.testing import ScriptedLlm, scripted_turn


def said(author: str, text: str, timestamp: float = 0.0) -> Event:
    role = "user" if author == "user" else "model"
    return Event(author=author, timestamp=timestamp, content=Content(role=role, parts=(Part.from_text(text),)))


def session(sid: str, *events: Event, user: str = "u") -> Session:
    return Session(id=sid, app_name="app", user_id=user, events=events)


def test_search_finds_events_sharing_a_word_with_the_query_per_user() -> None:
    memory = InMemoryMemoryService()
    memory.add_session_to_memory(
        session("s1", said("user", "My cat is called Tom.", 0.0), said("bot", "Nice cat!"), Event(author="bot"))
    ).pipe(ops.to_list()).run()
    memory.add_session_to_memory(session("s2", said("user", "I live in Paris"))).pipe(ops.to_list()).run()
    memory.add_session_to_memory(session("s3", said("user", "My cat is Felix"), user="other")).pipe(ops.to_list()).run()
    found = memory.search_memory("app", "u", "What's my CAT called?").run().memories
    assert [(m.author, m.content.text()) for m in found] == [("user", "My cat is called Tom."), ("bot", "Nice cat!")]
    assert found[0].timestamp == "1970-01-01T00:00:00+00:00"
    assert memory.search_memory("app", "u", "paris").run().memories[0].content.text() == "I live in Paris"
    assert memory.search_memory("app", "u", "dog").run().memories == ()
    assert memory.search_memory("app", "nobody", "cat").run().memories == ()
    assert memory.search_memory("other-app", "u", "cat").run().memories == ()


def test_adding_a_session_again_replaces_its_memories() -> None:
    memory = InMemoryMemoryService()
    memory.add_session_to_memory(session("s1", said("user", "tea please"))).pipe(ops.to_list()).run()
    memory.add_session_to_memory(session("s1", said("user", "coffee please"))).pipe(ops.to_list()).run()
    assert [m.content.text() for m in memory.search_memory("app", "u", "please").run().memories] == ["coffee please"]


def call(name: str, arguments: str) -> Chunk:
    return Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", name, arguments),))


def test_load_memory_in_a_run_finds_what_an_ended_session_said() -> None:
    model = ScriptedLlm(
        [
            scripted_turn(Chunk(text_delta="Noted: Tom.")),
            scripted_turn(call("load_memory", '{"query": "cat name"}')),
            scripted_turn(Chunk(text_delta="Your cat is Tom.")),
        ]
    )
    runner = InMemoryRunner(LlmAgent("bot", model, tools=[load_memory]), app_name="app")
    sessions = runner.session_service
    sessions.create_session("app", "u", session_id="first").run()
    runner.run_async("u", "first", Content(parts=(Part.from_text("My cat's name is Tom"),))).pipe(ops.to_list()).run()
    assert runner.memory_service is not None
    runner.memory_service.add_session_to_memory(sessions.get_session("app", "u", "first").run()).pipe(
        ops.to_list()
    ).run()
    sessions.create_session("app", "u", session_id="second").run()
    runner.run_async("u", "second", Content(parts=(Part.from_text("What is my cat called?"),))).pipe(
        ops.to_list()
    ).run()
    response = next(e for e in sessions.get_session("app", "u", "second").run().events if e.function_responses())
    memories = response.function_responses()[0].response["memories"]
    assert isinstance(memories, list)
    assert [(m["author"], m["content"]["parts"][0]["text"]) for m in memories] == [  # type: ignore[call-overload,index]
        ("user", "My cat's name is Tom")
    ]


def test_search_memory_without_a_memory_service_is_an_error_the_model_sees() -> None:
    def recall(query: str, tool_context: ToolContext) -> dict[str, int]:
        """Recall."""
        return {"n": len(tool_context.search_memory(query).run().memories)}

    model = ScriptedLlm([scripted_turn(call("recall", '{"query": "x"}')), scripted_turn(Chunk(text_delta="ok"))])
    sessions = InMemorySessionService()
    sessions.create_session("app", "u", session_id="s").run()
    Runner(LlmAgent("bot", model, tools=[recall]), "app", sessions).run_async(
        "u", "s", Content(parts=(Part.from_text("hi"),))
    ).pipe(ops.to_list()).run()
    response = next(e for e in sessions.get_session("app", "u", "s").run().events if e.function_responses())
    error = response.function_responses()[0].response["error"]
    assert isinstance(error, str) and "no memory service" in error


@pytest.mark.parametrize("query", ["", "   ", "?!"])
def test_a_query_without_words_finds_nothing(query: str) -> None:
    memory = InMemoryMemoryService()
    memory.add_session_to_memory(session("s1", said("user", "hello"))).pipe(ops.to_list()).run()
    assert memory.search_memory("app", "u", query).run().memories == ()
