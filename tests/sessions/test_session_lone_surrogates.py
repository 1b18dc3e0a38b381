"""No input poisons a session: a lone surrogate (what ``surrogateescape`` decoding or ``input()``
under ``LANG=C`` yields for a byte that is not UTF-8) is replaced by U+FFFD before anything is
stored or sent -- rxllm's one rule -- and a session already holding one (a row written by hand)
can still be read and continued. Real loopback server; memory, SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import Content, FunctionResponse, HttpTransport, Part, RetryPolicy
from rxllm._core.json_codec import without_lone_surrogates
from rxllm.agents import (
    BaseSessionService,
    Event,
    EventActions,
    InMemorySessionService,
    LlmAgent,
    PostgresSessionService,
    RunConfig,
    Runner,
    SqliteSessionService,
    StreamingMode,
)
from rxllm.agents._sessions.base import event_to_store
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService
from rxllm.testing import StubResponse, StubServer

from .conftest import reset_postgres

APP, USER, SESSION = "app", "u", "s"
SSE = RunConfig(streaming_mode=StreamingMode.SSE)
BAD = "caf\udce9 au lait \ud800"  # "café" read under LANG=C, and a lone high surrogate
GOOD = "caf\ufffd au lait \ufffd"


def answer(text: str) -> StubResponse:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}
        return json.dumps(body)

    return StubResponse.sse([chunk({"role": "assistant", "content": text}), chunk({}, "stop"), "[DONE]"])


@pytest.fixture
def transport() -> Iterator[HttpTransport]:
    created = HttpTransport(max_concurrent_streams=2)
    yield created
    created.close()


def model_on(server: StubServer, transport: HttpTransport) -> OpenAiChatModel:
    return OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real", transport=transport,
                           retry_policy=RetryPolicy.never())


def user_texts(request_json: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request_json["messages"] if m["role"] == "user"]


def test_the_rule_replaces_each_lone_surrogate_by_one_replacement_character() -> None:
    assert without_lone_surrogates(BAD) == GOOD
    clean = Content(role="user", parts=(Part.from_text("naïve 🎉"),))
    assert without_lone_surrogates(clean) is clean
    assert without_lone_surrogates({"k\udc80": ["x\udc80", ("y",)]}) == {"k\ufffd": ["x\ufffd", ("y",)]}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSessionService]:
    service: BaseSessionService
    if request.param == "memory":
        service = InMemorySessionService()
    elif request.param == "sqlite":
        service = SqliteSessionService(tmp_path / "s.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        reset_postgres(dsn)
        service = PostgresSessionService(dsn)
    service.create_session(APP, USER, session_id=SESSION).run()
    yield service
    close = getattr(service, "close", None)
    if close is not None:
        close()


def test_a_user_message_with_lone_surrogates_is_stored_and_sent_with_replacement_characters(
    sessions: BaseSessionService, transport: HttpTransport
) -> None:
    with StubServer([answer("Noted."), answer("Still fine.")]) as server:
        runner = Runner(LlmAgent("bot", model_on(server, transport)), APP, sessions)
        message = Content(role="user", parts=(Part.from_text(BAD),))
        first = runner.run_async(USER, SESSION, message, SSE).pipe(ops.to_list()).run()
        second = runner.run_async(USER, SESSION, Content(role="user", parts=(Part.from_text("and now?"),)), SSE)
        later = second.pipe(ops.to_list()).run()
        bodies = [request.json() for request in server.requests]
    assert first[-1].text() == "Noted." and later[-1].text() == "Still fine."
    assert user_texts(bodies[0]) == [GOOD]
    assert user_texts(bodies[1]) == [GOOD, "and now?"]
    stored = sessions.get_session(APP, USER, SESSION).run().events
    assert stored[0].content is not None and stored[0].content.text() == GOOD


def test_a_session_already_holding_a_lone_surrogate_can_be_read_and_continued(
    tmp_path: Path, transport: HttpTransport
) -> None:
    path = tmp_path / "s.db"
    with SqliteSessionService(path) as service:
        service.create_session(APP, USER, session_id=SESSION).run()
    event = Event(author="user", content=Content(role="user", parts=(Part.from_text("PLACEHOLDER"),)))
    row = event.model_dump_json(by_alias=True).replace("PLACEHOLDER", "caf\\udce9")  # as JSON escapes it
    with sqlite3.connect(path) as connection:  # a row written by another program, or an older version
        connection.execute(
            "INSERT INTO rxllm_events (app_name, user_id, session_id, id, invocation_id, author, timestamp, event) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (APP, USER, SESSION, event.id, event.invocation_id, "user", event.timestamp, row),
        )
    with SqliteSessionService(path) as service, StubServer([answer("Read you.")]) as server:
        held = service.get_session(APP, USER, SESSION).run().events
        assert len(held) == 1
        runner = Runner(LlmAgent("bot", model_on(server, transport)), APP, service)
        events = runner.run_async(USER, SESSION, Content(role="user", parts=(Part.from_text("hi"),)), SSE)
        assert events.pipe(ops.to_list()).run()[-1].text() == "Read you."
        assert user_texts(server.requests[0].json())[0] == "caf\ufffd"


def test_the_service_replaces_lone_surrogates_in_the_users_message(transport: HttpTransport) -> None:
    with StubServer([answer("Noted.")]) as server:
        events = AiService(model_on(server, transport)).stream(BAD).pipe(ops.to_list()).run()
        body = server.requests[0].json()
    assert events[-1].response.text() == "Noted."
    assert user_texts(body) == [GOOD]


_CHILD = textwrap.dedent(
    """
    import sys
    from rxllm import Content, Part
    from rxllm.agents import InMemorySessionService, LlmAgent, RunConfig, Runner, StreamingMode
    from rxllm.providers.openai import OpenAiChatModel
    text = sys.stdin.readline().rstrip("\\n")  # LANG=C: the byte 0xE9 arrives as the lone surrogate U+DCE9
    assert "\\udce9" in text, ascii(text)
    service = InMemorySessionService()
    service.create_session("app", "u", session_id="s").run()
    model = OpenAiChatModel("m", base_url=sys.argv[1] + "/v1", api_key="sk-test-not-real")
    runner = Runner(LlmAgent("bot", model), "app", service)
    events = runner.run_async("u", "s", Content(role="user", parts=(Part.from_text(text),)),
                              RunConfig(streaming_mode=StreamingMode.SSE)).run()
    print(ascii(service.get_session("app", "u", "s").run().events[0].content.text()))
    """
)


def test_input_read_under_lang_c_in_a_real_process_is_stored_with_a_replacement_character() -> None:
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "", "PYTHONUTF8": "0"}
    with StubServer([answer("Noted.")]) as server:
        done = subprocess.run([sys.executable, "-c", _CHILD, server.url], input=b"caf\xe9\n", env=env,
                              capture_output=True, timeout=60, check=False)
        sent = user_texts(server.requests[0].json())
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert done.stdout.decode().strip() == ascii("caf\ufffd")
    assert sent == ["caf\ufffd"]


class _NotedPart(Part):
    """A user's ``Part`` subclass: a field its declared type (``Part``) does not have."""

    note: str = ""


def _tool_answer(response: dict[str, Any]) -> Event:
    call_response = FunctionResponse(id="c1", name="lookup", response=response)
    return Event(author="bot", content=Content(role="user", parts=(Part(function_response=call_response),)))


def test_a_lone_surrogate_deep_in_a_tool_response_is_replaced_where_the_fast_path_cannot_see_it() -> None:
    deep = {"rows": [{"cells": [{"text": "ok"}, {"text": "x\udce9", "n": 1.5}]}], "k\ud800": None}
    stored = event_to_store(_tool_answer(deep))
    response = stored.function_responses()[0].response
    assert response == {"rows": [{"cells": [{"text": "ok"}, {"text": "x\ufffd", "n": 1.5}]}], "k\ufffd": None}
    clean = _tool_answer({"rows": [{"text": "naïve 🎉"}]})
    assert event_to_store(clean) is clean  # nothing replaced: the very event, no copy


def test_a_value_mutated_after_validation_and_one_in_a_subclass_field_are_replaced_too() -> None:
    event = Event(author="bot", actions=EventActions(state_delta={"draft": "fine"}))
    event.actions.state_delta["draft"] = ["still", {"deep": "x\udce9"}]  # after validation: no validator saw it
    assert event_to_store(event).actions.state_delta == {"draft": ["still", {"deep": "x\ufffd"}]}
    noted = Event(author="bot", content=Content(role="model", parts=(_NotedPart(text="hi", note="x\ud800"),)))
    (part,) = event_to_store(noted).content.parts  # type: ignore[union-attr]
    assert isinstance(part, _NotedPart) and part.note == "x\ufffd" and part.text == "hi"


def test_a_value_the_serializer_refuses_is_still_walked_and_kept_otherwise_as_it_was() -> None:
    marker = object()  # no JSON form: the serializer refuses the whole value, the walk replaces the text
    cleaned = without_lone_surrogates({"obj": marker, "items": ("x\udc80", {1, 2}), "n": float("nan")})
    assert cleaned["obj"] is marker and cleaned["items"][0] == "x\ufffd" and cleaned["items"][1] == {1, 2}
    kept = {"obj": marker, "t": "fine"}
    assert without_lone_surrogates(kept) is kept
    nan = {"n": float("nan"), "big": 10**5000}  # written by the serializer as it is (no text): returned as it is
    assert without_lone_surrogates(nan) is nan
