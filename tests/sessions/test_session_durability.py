"""Durability: two OS processes appending to one session lose nothing; a SIGKILL mid-append leaves
the store consistent; a PostgreSQL connection dropped mid-call fails that call and the next reconnects."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from reactivex import operators as ops

import rxllm
from rxllm import Content, Part, StoreError
from rxllm.agents import BaseSessionService, Event, EventActions, PostgresSessionService, Session, SqliteSessionService
from rxllm.agents._sessions.sql import SCHEMA_VERSION

from .conftest import reset_postgres

APPENDER = Path(__file__).with_name("appender.py")
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


def spawn(kind: str, where: str, writer: str, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(APPENDER), kind, where, writer, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def check_writer(session: Session, writer: str) -> int:
    """The writer's stored events are 0..m-1 in order and its state keys match exactly; returns m."""
    texts = [e.text() for e in session.events if e.author == writer]
    stored = len(texts)
    assert texts == [f"{writer}:{i}" for i in range(stored)]
    keys = sorted(k for k in session.state if k.startswith(f"{writer}:"))
    assert keys == sorted(f"{writer}:{i}" for i in range(stored))
    if stored:
        assert session.state[writer] == stored - 1
    else:
        assert writer not in session.state
    return stored


def test_two_processes_appending_1000_events_each_lose_nothing(target: tuple[str, str]) -> None:
    kind, where = target
    service = open_service(kind, where)
    try:
        service.create_session("app", "u", session_id="s").run()
        children = [spawn(kind, where, writer, 1000) for writer in ("alpha", "beta")]
        for child in children:
            out, err = child.communicate(timeout=600)
            assert child.returncode == 0, err
            assert out.splitlines()[-1] == "999"
        session = service.get_session("app", "u", "s").run()
        assert len(session.events) == 2000
        assert check_writer(session, "alpha") == 1000
        assert check_writer(session, "beta") == 1000
        assert len({e.id for e in session.events}) == 2000
    finally:
        service.close()  # type: ignore[attr-defined]


def test_a_process_killed_mid_append_leaves_the_store_consistent(target: tuple[str, str]) -> None:
    kind, where = target
    service = open_service(kind, where)
    try:
        service.create_session("app", "u", session_id="s").run()
        child = spawn(kind, where, "victim", 0)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        acked = -1
        while acked < 150:  # the child is appending as fast as it can: kill it in the middle of one
            acked = int(child.stdout.readline())
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        child.stdout.close()
        assert child.stderr is not None
        child.stderr.close()
        session = service.get_session("app", "u", "s").run()
        assert check_writer(session, "victim") >= acked + 1  # every acknowledged append survived
        # the store still takes appends
        service.append_event(session, Event(author="after", actions=EventActions(state_delta={"after": 1}))).run()
        assert service.get_session("app", "u", "s").run().state["after"] == 1
    finally:
        service.close()  # type: ignore[attr-defined]


def _service_backends(admin: psycopg.Connection[tuple[object, ...]], name: str) -> list[int]:
    rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchall()
    return [int(str(row[0])) for row in rows]


def test_a_dropped_postgres_connection_fails_the_call_and_the_next_reconnects(pg_dsn: str) -> None:
    reset_postgres(pg_dsn)
    name = "rxllm-drop-test"
    service = PostgresSessionService(f"{pg_dsn}?application_name={name}", min_size=1, max_size=1)
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        try:
            session = service.create_session("app", "u", session_id="s").run()
            # Mid-call: hold the session row so the service's append waits on our lock, then kill its backend.
            with admin.transaction():
                admin.execute("SELECT 1 FROM rxllm_sessions WHERE id = 's' FOR UPDATE")
                failed = threading.Event()
                errors: list[Exception] = []

                def on_error(error: Exception) -> None:
                    errors.append(error)
                    failed.set()

                blocked = Event(author="bot", actions=EventActions(state_delta={"x": 1}))
                service.append_event(session, blocked).subscribe(on_error=on_error, on_completed=failed.set)
                waiting: list[int] = []
                for _ in range(10_000):  # until the append is blocked on our row lock (bounded)
                    waiting = [
                        int(str(r[0]))
                        for r in admin.execute(
                            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                            (name,),
                        ).fetchall()
                    ]
                    if waiting:
                        break
                assert waiting, "the service's append never waited on the lock"
                admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0],))
                assert failed.wait(60)
            assert len(errors) == 1 and isinstance(errors[0], StoreError), errors
            assert "password" not in str(errors[0]).lower()
            # Nothing half-stored, and the next call reconnects.
            after = service.get_session("app", "u", "s").run()
            assert after.events == () and after.state == {}
            stored = service.append_event(
                session, Event(author="bot", content=Content(role="model", parts=(Part.from_text("back"),)))
            ).run()
            assert service.get_session("app", "u", "s").run().events == (stored,)
            # An idle pooled connection killed between calls: the next call just works.
            for pid in _service_backends(admin, name):
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            assert service.get_session("app", "u", "s").pipe(ops.count()).run() == 1
        finally:
            service.close()


def test_postgres_service_reports_a_missing_server_as_a_store_error(tmp_path: Path) -> None:
    service = PostgresSessionService("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", timeout=0.5)
    try:
        with pytest.raises(StoreError):
            service.list_sessions("app", "u").run()
    finally:
        service.close()
    assert "127.0.0.1:1/none" in repr(service)


def test_sqlite_service_reports_an_unopenable_file_as_a_store_error(tmp_path: Path) -> None:
    with SqliteSessionService(tmp_path / "no" / "such" / "dir" / "x.db") as service, pytest.raises(
        StoreError, match="SQLite"
    ):
        service.list_sessions("app", "u").run()


def _record_schema_version(kind: str, where: str, version: int) -> None:
    if kind == "sqlite":
        with sqlite3.connect(where) as connection:
            connection.execute("UPDATE rxllm_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        connection.close()
    else:
        with psycopg.connect(where, autocommit=True) as pg:
            pg.execute("UPDATE rxllm_meta SET value = %s WHERE key = 'schema_version'", (str(version),))


def test_a_database_written_by_a_newer_rxllm_is_refused(target: tuple[str, str]) -> None:
    kind, where = target
    first = open_service(kind, where)
    first.create_session("app", "u", session_id="s").run()  # creates the tables, records SCHEMA_VERSION
    first.close()  # type: ignore[attr-defined]
    _record_schema_version(kind, where, SCHEMA_VERSION + 1)
    try:
        newer = open_service(kind, where)
        try:
            with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer than"):
                newer.get_session("app", "u", "s").run()
        finally:
            newer.close()  # type: ignore[attr-defined]
    finally:
        _record_schema_version(kind, where, SCHEMA_VERSION)  # the PostgreSQL server outlives the test
    reopened = open_service(kind, where)
    assert reopened.get_session("app", "u", "s").pipe(ops.count()).run() == 1
    reopened.close()  # type: ignore[attr-defined]
