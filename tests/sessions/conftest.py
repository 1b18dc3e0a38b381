"""Session stores under test: memory, SQLite (a temp file) and a real PostgreSQL on loopback.

One PostgreSQL server per test session (``pg_server.LocalPostgres``); each test gets fresh tables.
Without PostgreSQL binaries the PostgreSQL cases skip, and the run ends with a loud banner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from pg_server import LocalPostgres, postgres_binaries

from rxllm.agents import BaseSessionService, InMemorySessionService, PostgresSessionService, SqliteSessionService

STORES = ["memory", "sqlite", "postgres"]
_SKIPPED: list[str] = []


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    why = postgres_binaries()
    if why is not None:
        _SKIPPED.append(why)
        pytest.skip(f"POSTGRESQL NOT TESTED: {why}")
    with LocalPostgres() as server:
        yield server.dsn


def reset_postgres(dsn: str) -> None:
    """Empty rxllm's tables (they survive from test to test on the one server)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        exists = connection.execute("SELECT to_regclass('rxllm_sessions')").fetchone()
        if exists is not None and exists[0] is not None:
            connection.execute("TRUNCATE rxllm_events, rxllm_sessions, rxllm_app_states, rxllm_user_states")


StoreFactory = Callable[[], BaseSessionService]


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """Builds services on one store: SQLite and PostgreSQL services share the test's database."""
    made: list[BaseSessionService] = []
    dsn = ""
    if store_kind == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        reset_postgres(dsn)
    shared_memory = InMemorySessionService()

    def make() -> BaseSessionService:
        service: BaseSessionService
        if store_kind == "memory":
            return shared_memory
        if store_kind == "sqlite":
            service = SqliteSessionService(tmp_path / "sessions.db")
        else:
            service = PostgresSessionService(dsn, max_size=4)
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()  # type: ignore[attr-defined]


@pytest.fixture
def service(make_store: StoreFactory) -> BaseSessionService:
    return make_store()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SKIPPED:
        terminalreporter.write_sep("!", "PostgreSQL session store NOT TESTED", red=True, bold=True)
        terminalreporter.write_line(_SKIPPED[0], red=True)
