"""A paused tool call survives a process restart: one process asks for confirmation and exits; a new
process with a fresh session service (SQLite file, real PostgreSQL) answers, and the call runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from reactivex import operators as ops

import rxllm
from rxllm import Chunk, Content, FunctionResponse, Part
from rxllm.agents import (
    BaseSessionService,
    FunctionTool,
    LlmAgent,
    PostgresSessionService,
    Runner,
    SqliteSessionService,
    ToolConfirmation,
)
from rxllm.testing import ScriptedLlm, scripted_turn

from .conftest import reset_postgres

CHILD = Path(__file__).with_name("confirmation_child.py")
ROOT = Path(rxllm.__file__).resolve().parent.parent


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "sessions.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        reset_postgres(dsn)
        yield "postgres", dsn


def open_service(kind: str, where: str) -> BaseSessionService:
    return SqliteSessionService(where) if kind == "sqlite" else PostgresSessionService(where, max_size=2)


def test_a_call_paused_for_confirmation_runs_after_a_process_restart(target: tuple[str, str]) -> None:
    kind, where = target
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run(
        [sys.executable, str(CHILD), kind, where], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert child.returncode == 0, child.stderr
    confirmation_id = child.stdout.strip()
    assert confirmation_id

    deleted: list[str] = []

    def delete_file(path: str) -> dict[str, str]:
        """Delete a file."""
        deleted.append(path)
        return {"deleted": path}

    service = open_service(kind, where)
    try:
        stored = service.get_session("files", "u1", "s1").run()
        asked = stored.events[3]
        assert asked.actions.requested_tool_confirmations["call_1"] == ToolConfirmation(
            hint="Please approve or reject the tool call delete_file() by responding with a FunctionResponse with "
            "an expected ToolConfirmation payload."
        )
        model = ScriptedLlm([scripted_turn(Chunk(text_delta="Deleted."))])
        agent = LlmAgent("files", model, tools=[FunctionTool(delete_file, require_confirmation=True)])
        answer = Content(role="user", parts=(Part(function_response=FunctionResponse(
            id=confirmation_id, name="adk_request_confirmation", response={"confirmed": True})),))

        events = Runner(agent, "files", service).run_async("u1", "s1", answer).pipe(ops.to_list()).run()

        assert deleted == ["/tmp/report.txt"]
        assert [(r.id, r.response) for e in events for r in e.function_responses()] == [
            ("call_1", {"deleted": "/tmp/report.txt"})
        ]
        assert events[-1].text() == "Deleted."
        (request, _stream) = model.requests[0]
        assert [c.parts[0].function_response.response for c in request.contents if c.parts[0].function_response] == [
            {"deleted": "/tmp/report.txt"}
        ]
        after = service.get_session("files", "u1", "s1").run()
        assert len(after.events) == len(stored.events) + 3  # the answer, the resumed response, the reply
    finally:
        service.close()  # type: ignore[attr-defined]
