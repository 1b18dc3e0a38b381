"""Session stores fail in bounded time: a frozen PostgreSQL (every server process SIGSTOPped: a
hung host, a dropped network) fails the call in flight and a new one with ``StoreError`` within
the configured bounds, and the first call after SIGCONT works again; SQLite's busy wait is
bounded by ``busy_timeout`` against another process holding the write lock.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import LocalPostgres, postgres_binaries

from rxllm import ConfigurationError, StoreError
from rxllm.agents import Event, PostgresSessionService, SqliteSessionService
from rxllm.agents._sessions.postgres import _connection_settings

WAIT = 30.0


@pytest.fixture
def frozen_capable_pg() -> Iterator[LocalPostgres]:
    why = postgres_binaries()
    if why is not None:
        pytest.skip(f"POSTGRESQL NOT TESTED: {why}")
    server = LocalPostgres().start()
    try:
        yield server
    finally:
        server.thaw()
        server.stop()


def call(observable: object) -> tuple[object, BaseException | None]:
    """Run a store call on this thread, bounded by WAIT: its item or its error."""
    done = threading.Event()
    out: list[object] = []
    errors: list[BaseException] = []

    def on_error(error: Exception) -> None:
        errors.append(error)
        done.set()

    observable.subscribe(out.append, on_error, done.set)  # type: ignore[attr-defined]
    assert done.wait(WAIT), "the store call did not end"
    return (out[0] if out else None), (errors[0] if errors else None)


def test_a_frozen_postgres_fails_calls_with_store_error_and_the_next_call_after_sigcont_works(
    frozen_capable_pg: LocalPostgres,
) -> None:
    service = PostgresSessionService(frozen_capable_pg.dsn, min_size=1, max_size=2, timeout=3.0,
                                     connect_timeout=2.0, statement_timeout=1.0)
    try:
        session, error = call(service.create_session("app", "u", session_id="s"))
        assert error is None, error
        frozen_capable_pg.freeze()
        try:
            _, in_flight = call(service.append_event(session, Event(author="user")))  # type: ignore[arg-type]
            _, read = call(service.get_session("app", "u", "s"))
        finally:
            frozen_capable_pg.thaw()
        assert isinstance(in_flight, StoreError), repr(in_flight)
        assert isinstance(read, StoreError), repr(read)
        assert frozen_capable_pg.dsn not in str(in_flight)
        _, error = call(service.append_event(session, Event(author="user")))  # type: ignore[arg-type]
        assert error is None, error
        restored, error = call(service.get_session("app", "u", "s"))
        assert error is None and len(restored.events) == 1  # type: ignore[attr-defined]
    finally:
        service.close()


def test_the_postgres_bounds_reach_libpq_and_a_dsn_keeps_its_own_keepalives() -> None:
    settings = _connection_settings("postgresql://u@h/db?keepalives_idle=5", 0.5, 2.5)
    assert settings == {"keepalives": "1", "keepalives_interval": "10", "keepalives_count": "3",
                        "connect_timeout": "2", "options": "-c statement_timeout=2500"}
    assert "options" not in _connection_settings("postgresql://u@h/db", 10.0, None)
    for bad in ({"connect_timeout": 0}, {"statement_timeout": -1.0}, {"statement_timeout": float("inf")}):
        with pytest.raises(ConfigurationError):
            PostgresSessionService("postgresql://u@127.0.0.1/db", **bad)  # type: ignore[arg-type]


def test_postgres_cancels_a_statement_past_statement_timeout(frozen_capable_pg: LocalPostgres) -> None:
    service = PostgresSessionService(frozen_capable_pg.dsn, statement_timeout=1.0)
    try:
        def slow(connection: object) -> None:
            connection.execute("SELECT pg_sleep(20)")  # type: ignore[attr-defined]

        _, error = call(service._run(slow, write=False))
        assert isinstance(error, StoreError) and "statement timeout" in str(error), repr(error)
        _, error = call(service.create_session("app", "u"))
        assert error is None, error
    finally:
        service.close()


_LOCK_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    connection = sqlite3.connect(sys.argv[1], isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    connection.execute("ROLLBACK")
    """
)


def test_sqlite_busy_wait_is_bounded_by_busy_timeout_against_another_process(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SqliteSessionService(path) as setup:
        session, error = call(setup.create_session("app", "u", session_id="s"))
        assert error is None
    with subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, str(path)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            with SqliteSessionService(path, busy_timeout=0.5) as service:
                _, error = call(service.append_event(session, Event(author="user")))  # type: ignore[arg-type]
                assert isinstance(error, StoreError) and "locked" in str(error), repr(error)
                assert holder.stdin is not None
                holder.stdin.write("\n")
                holder.stdin.flush()
                assert holder.wait(WAIT) == 0
                _, error = call(service.append_event(session, Event(author="user")))  # type: ignore[arg-type]
                assert error is None, error
        finally:
            holder.kill()


_READER = textwrap.dedent(
    """
    import os, shutil, sys, tempfile
    from rxllm import StoreError
    from rxllm.agents import Event, SqliteSessionService
    if sys.argv[2] != "-":  # root writes any file: drop to another user once everything is imported
        # one read and one write on a copy first, so every module they load is loaded while this
        # process may still read the installed packages (a checkout may sit in a root-only folder)
        with tempfile.TemporaryDirectory() as warm:
            shutil.copy(sys.argv[1], os.path.join(warm, "warm.db"))
            with SqliteSessionService(os.path.join(warm, "warm.db")) as service:
                session = service.get_session("app", "u", "s").run()
                service.append_event(session, Event(author="user")).run()
        os.setgid(int(sys.argv[3]))
        os.setuid(int(sys.argv[2]))
    with SqliteSessionService(sys.argv[1]) as service:
        session = service.get_session("app", "u", "s").run()
        print("events", len(session.events), session.state)
        try:
            service.append_event(session, Event(author="user")).run()
        except StoreError as exc:
            print("write refused:", type(exc).__name__, exc)
    """
)


def test_a_read_only_sqlite_file_is_readable_by_a_process_that_may_not_write_it() -> None:
    import os
    import pwd
    import shutil
    import tempfile

    from rxllm.agents import EventActions

    directory = Path(tempfile.mkdtemp(prefix="rxllm-ro-"))
    try:
        path = directory / "sessions.db"
        with SqliteSessionService(path) as service:
            session, _ = call(service.create_session("app", "u", session_id="s"))
            _, error = call(service.append_event(session, Event(author="user",  # type: ignore[arg-type]
                                                                actions=EventActions(state_delta={"n": 1}))))
            assert error is None
        for leftover in directory.glob("sessions.db-*"):
            leftover.unlink()  # a cleanly closed WAL database: only the file itself is left
        path.chmod(0o444)
        directory.chmod(0o555)
        user = ["-", "-"]
        if os.geteuid() == 0:  # root writes any file: read it as another user
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root without a 'postgres' user to read the file as")
            user = [str(entry.pw_uid), str(entry.pw_gid)]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        done = subprocess.run([sys.executable, "-c", _READER, str(path), *user], capture_output=True, text=True,
                              env=env, timeout=60, check=False, cwd=str(directory))
        assert done.returncode == 0, done.stderr[-2000:]
        assert "events 1 {'n': 1}" in done.stdout, done.stdout
        assert "write refused: StoreError" in done.stdout and "readonly" in done.stdout, done.stdout
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory, ignore_errors=True)
