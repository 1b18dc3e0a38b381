"""``SqliteSessionService``: sessions in one SQLite file (standard library, WAL, no server).

The embedded default for anything that must survive a restart. Several processes on one host may
share the file: every append is one ``BEGIN IMMEDIATE`` transaction (the event row and its state
delta together), so concurrent writers queue on SQLite's write lock and nothing is lost.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, TypeVar

from pydantic import JsonValue

from .._aio import AwaitableObservable, MaybeObservable, awaitable
from .._errors import ConfigurationError, RxLlmError, StoreError
from ._event import Event
from ._rx import emit_now
from ._sessions import (
    BaseSessionService,
    GetSessionConfig,
    Session,
    event_to_store,
    merged_state,
    missing_session_error,
    taken_id_error,
)
from ._state import apply_state_delta
from ._store_io import call_off_thread, dumps_state, event_from_json, event_to_json, loads_state

__all__ = ["SCHEMA_VERSION", "SqliteSessionService"]

T = TypeVar("T")

SCHEMA_VERSION = 1
"""The version of the tables this module writes (recorded in ``rxllm_meta``)."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rxllm_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS rxllm_sessions (
        app_name TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL,
        state TEXT NOT NULL, create_time REAL NOT NULL, update_time REAL NOT NULL,
        PRIMARY KEY (app_name, user_id, id))""",
    """CREATE TABLE IF NOT EXISTS rxllm_app_states (
        app_name TEXT PRIMARY KEY, state TEXT NOT NULL, update_time REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS rxllm_user_states (
        app_name TEXT NOT NULL, user_id TEXT NOT NULL, state TEXT NOT NULL, update_time REAL NOT NULL,
        PRIMARY KEY (app_name, user_id))""",
    """CREATE TABLE IF NOT EXISTS rxllm_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        app_name TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
        id TEXT NOT NULL, invocation_id TEXT NOT NULL, author TEXT NOT NULL,
        timestamp REAL NOT NULL, event TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS rxllm_events_by_session ON rxllm_events (app_name, user_id, session_id, seq)",
)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


def _store_error(exc: Exception) -> RxLlmError:
    return StoreError(f"SQLite session store failed: {type(exc).__name__}: {exc}")


class SqliteSessionService(BaseSessionService):
    """Sessions in a SQLite file: survive restarts; share one host's file between processes.

    Args:
        path: the database file (created with its tables on first use).
        synchronous: SQLite's ``synchronous`` setting. ``"NORMAL"`` (the default, with WAL) keeps
            every committed append through a process crash or ``SIGKILL``; a power loss may lose
            the last commits but never leaves an event without its state delta. ``"FULL"`` also
            survives power loss, at an ``fsync`` per append.
        busy_timeout: seconds a write waits for another process's write lock before failing
            with :class:`~rxllm.StoreError`.

    I/O runs on the service's own worker thread (one connection, opened on first use, WAL mode):
    every method returns at once and emits from that thread. Disposing before the work started
    cancels it; a started statement completes (an append is never half stored). Errors are
    :class:`~rxllm.StoreError` (database errors) or :class:`~rxllm.ConfigurationError` (missing
    session, taken id). Appends follow :class:`BaseSessionService`'s merge rule. :meth:`close`
    (or ``with``) closes the connection.

    >>> import tempfile, pathlib
    >>> from rxllm.agents import Event, EventActions, SqliteSessionService
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sessions.db"
    >>> with SqliteSessionService(path) as service:
    ...     session = service.create_session("shop", "u1", session_id="s1").run()
    ...     _ = service.append_event(session, Event(author="user", actions=EventActions(state_delta={"n": 1}))).run()
    >>> with SqliteSessionService(path) as reopened:
    ...     restored = reopened.get_session("shop", "u1", "s1").run()
    >>> restored.state, len(restored.events)
    ({'n': 1}, 1)
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: Synchronous = "NORMAL", busy_timeout: float = 30.0
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigurationError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        if busy_timeout <= 0:
            raise ConfigurationError(f"busy_timeout must be positive, got {busy_timeout!r}")
        self._path = os.fspath(path)
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rxllm-sqlite")
        self._connection: sqlite3.Connection | None = None
        self._closed = threading.Event()

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        return f"SqliteSessionService({self._path!r})"

    def __enter__(self) -> SqliteSessionService:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish queued work, then close the connection (idempotent). Later calls fail with StoreError."""
        if self._closed.is_set():
            return
        self._closed.set()

        def close_connection() -> None:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

        try:
            self._executor.submit(close_connection).result()
        finally:
            self._executor.shutdown(wait=True)

    # -- the connection (worker thread only) ---------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            connection = sqlite3.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute(f"PRAGMA synchronous={self._synchronous}")
                self._migrate(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    @staticmethod
    def _migrate(connection: sqlite3.Connection) -> None:
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:
                connection.execute(statement)
            row = connection.execute("SELECT value FROM rxllm_meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                connection.execute(
                    "INSERT INTO rxllm_meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"the session database has schema version {row[0]}, newer than this rxllm's "
                    f"{SCHEMA_VERSION}: upgrade rxllm"
                )
            # versions below SCHEMA_VERSION would be migrated here, step by step
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise

    def _transaction(self, work: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        connection = self._conn()
        connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = work(connection)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return result

    def _run(self, work: Callable[[sqlite3.Connection], T | None], *, write: bool) -> AwaitableObservable[T]:
        def supplier() -> T | None:
            return self._transaction(work, write=write)

        return call_off_thread(self._executor, supplier, map_error=_store_error)

    # -- the service -----------------------------------------------------------------------------

    def create_session(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, JsonValue] | None = None,
        session_id: str | None = None,
    ) -> AwaitableObservable[Session]:
        """Create a session; see :meth:`BaseSessionService.create_session`."""
        initial = dict(state or {})

        def create(connection: sqlite3.Connection) -> Session:
            sid = session_id if session_id is not None else str(uuid.uuid4())
            taken = connection.execute(
                "SELECT 1 FROM rxllm_sessions WHERE app_name = ? AND user_id = ? AND id = ?", (app_name, user_id, sid)
            ).fetchone()
            if taken is not None:
                raise taken_id_error(app_name, user_id, sid)
            now = time.time()
            app, user = self._scopes(connection, app_name, user_id)
            own: dict[str, JsonValue] = {}
            changed = apply_state_delta(initial, app=app, user=user, session=own)
            self._write_scopes(connection, app_name, user_id, app, user, changed, now)
            connection.execute(
                "INSERT INTO rxllm_sessions (app_name, user_id, id, state, create_time, update_time) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (app_name, user_id, sid, dumps_state(own), now, now),
            )
            return Session.model_construct(
                id=sid,
                app_name=app_name,
                user_id=user_id,
                state=merged_state(own, app, user),
                events=(),
                last_update_time=now,
            )

        return self._run(create, write=True)

    def get_session(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> MaybeObservable[Session]:
        """Emit a snapshot, or nothing; see :meth:`BaseSessionService.get_session`."""
        limit = -1 if config is None or config.num_recent_events is None else config.num_recent_events
        after = None if config is None else config.after_timestamp

        def get(connection: sqlite3.Connection) -> Session | None:
            row = connection.execute(
                "SELECT state, update_time FROM rxllm_sessions WHERE app_name = ? AND user_id = ? AND id = ?",
                (app_name, user_id, session_id),
            ).fetchone()
            if row is None:
                return None
            app, user = self._scopes(connection, app_name, user_id)
            rows = connection.execute(
                "SELECT event FROM (SELECT seq, timestamp, event FROM rxllm_events "
                "WHERE app_name = ? AND user_id = ? AND session_id = ? ORDER BY seq DESC LIMIT ?) "
                "WHERE ? IS NULL OR timestamp >= ? ORDER BY seq",
                (app_name, user_id, session_id, limit, after, after),
            ).fetchall()
            return Session.model_construct(
                id=session_id,
                app_name=app_name,
                user_id=user_id,
                state=merged_state(loads_state(row[0]), app, user),
                events=tuple(event_from_json(event_row[0]) for event_row in rows),
                last_update_time=row[1],
            )

        return MaybeObservable(self._run(get, write=False))

    def list_sessions(self, app_name: str, user_id: str) -> AwaitableObservable[list[Session]]:
        """Emit the user's sessions without events; see :meth:`BaseSessionService.list_sessions`."""

        def listing(connection: sqlite3.Connection) -> list[Session]:
            app, user = self._scopes(connection, app_name, user_id)
            rows = connection.execute(
                "SELECT id, state, update_time FROM rxllm_sessions WHERE app_name = ? AND user_id = ? "
                "ORDER BY create_time, id",
                (app_name, user_id),
            ).fetchall()
            return [
                Session.model_construct(
                    id=sid,
                    app_name=app_name,
                    user_id=user_id,
                    state=merged_state(loads_state(state), app, user),
                    events=(),
                    last_update_time=update_time,
                )
                for sid, state, update_time in rows
            ]

        return self._run(listing, write=False)

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> MaybeObservable[None]:
        """Delete the session and its events in one transaction; see :meth:`BaseSessionService.delete_session`."""

        def delete(connection: sqlite3.Connection) -> None:
            key = (app_name, user_id, session_id)
            connection.execute("DELETE FROM rxllm_events WHERE app_name = ? AND user_id = ? AND session_id = ?", key)
            connection.execute("DELETE FROM rxllm_sessions WHERE app_name = ? AND user_id = ? AND id = ?", key)

        return MaybeObservable(self._run(delete, write=True))

    def append_event(self, session: Session, event: Event) -> AwaitableObservable[Event]:
        """Store a non-partial event and its state delta in one transaction; see ``BaseSessionService``."""
        if event.partial:
            return awaitable(emit_now(event))  # not stored; emitted during subscribe, as the memory store does
        stored_event = event_to_store(event)
        payload = event_to_json(stored_event)
        app_name, user_id, session_id = session.app_name, session.user_id, session.id

        def append(connection: sqlite3.Connection) -> Event:
            row = connection.execute(
                "SELECT state FROM rxllm_sessions WHERE app_name = ? AND user_id = ? AND id = ?",
                (app_name, user_id, session_id),
            ).fetchone()
            if row is None:
                raise missing_session_error(session)
            own = loads_state(row[0])
            delta = stored_event.actions.state_delta
            app, user = self._scopes(connection, app_name, user_id) if delta else ({}, {})
            changed = apply_state_delta(delta, app=app, user=user, session=own)
            self._write_scopes(connection, app_name, user_id, app, user, changed, stored_event.timestamp)
            connection.execute(
                "INSERT INTO rxllm_events (app_name, user_id, session_id, id, invocation_id, author, timestamp, event) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    app_name,
                    user_id,
                    session_id,
                    stored_event.id,
                    stored_event.invocation_id,
                    stored_event.author,
                    stored_event.timestamp,
                    payload,
                ),
            )
            connection.execute(
                "UPDATE rxllm_sessions SET state = ?, update_time = ? WHERE app_name = ? AND user_id = ? AND id = ?",
                (
                    dumps_state(own) if "session" in changed else row[0],
                    stored_event.timestamp,
                    app_name,
                    user_id,
                    session_id,
                ),
            )
            return stored_event

        return self._run(append, write=True)

    # -- state scopes ----------------------------------------------------------------------------

    @staticmethod
    def _scopes(
        connection: sqlite3.Connection, app_name: str, user_id: str
    ) -> tuple[dict[str, JsonValue], dict[str, JsonValue]]:
        app_row = connection.execute("SELECT state FROM rxllm_app_states WHERE app_name = ?", (app_name,)).fetchone()
        user_row = connection.execute(
            "SELECT state FROM rxllm_user_states WHERE app_name = ? AND user_id = ?", (app_name, user_id)
        ).fetchone()
        return loads_state(app_row[0] if app_row else None), loads_state(user_row[0] if user_row else None)

    @staticmethod
    def _write_scopes(
        connection: sqlite3.Connection,
        app_name: str,
        user_id: str,
        app: dict[str, JsonValue],
        user: dict[str, JsonValue],
        changed: set[str],
        now: float,
    ) -> None:
        if "app" in changed:
            connection.execute(
                "INSERT INTO rxllm_app_states (app_name, state, update_time) VALUES (?, ?, ?) "
                "ON CONFLICT (app_name) DO UPDATE SET state = excluded.state, update_time = excluded.update_time",
                (app_name, dumps_state(app), now),
            )
        if "user" in changed:
            connection.execute(
                "INSERT INTO rxllm_user_states (app_name, user_id, state, update_time) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (app_name, user_id) DO UPDATE SET state = excluded.state, "
                "update_time = excluded.update_time",
                (app_name, user_id, dumps_state(user), now),
            )
