"""``SqliteSessionService``: sessions in one SQLite file (standard library, WAL, no server).

The embedded default for anything that must survive a restart. Several processes on one host may
share the file: every append is one ``BEGIN IMMEDIATE`` transaction (the event row and its state
delta together), so concurrent writers queue on SQLite's write lock and nothing is lost.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable
from typing import Literal, TypeVar

from ..._core.errors import ConfigurationError, StoreError
from ..._core.threads import thread_pool
from .sql import SCHEMA_VERSION, Dialect, SqlConnection, SqlSessionService

__all__ = ["SCHEMA_VERSION", "SqliteSessionService"]

T = TypeVar("T")

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

_NOT_WRITABLE = frozenset({3, 8, 14})  # SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN (primary result codes)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class SqliteSessionService(SqlSessionService):
    """Sessions in a SQLite file: survive restarts; share one host's file between processes.

    Args:
        path: the database file (created with its tables on first use).
        synchronous: SQLite's ``synchronous`` setting. ``"NORMAL"`` (the default, with WAL) keeps
            every committed append through a process crash or ``SIGKILL``; a power loss may lose
            the last commits but never leaves an event without its state delta. ``"FULL"`` also
            survives power loss, at an ``fsync`` per append.
        busy_timeout: seconds a write waits for another process's write lock before failing
            with :class:`~rxllm.StoreError`.

    An existing file this process may not write (its mode, a read-only mount) is opened
    read-only: reads work, writes fail with :class:`~rxllm.StoreError`.

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

    _DIALECT = Dialect("SQLite", _SCHEMA)

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
        self._executor = thread_pool(1, "rxllm-sqlite")
        self._connection: sqlite3.Connection | None = None
        self._closed = threading.Event()

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        return f"SqliteSessionService({self._path!r})"

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
                self._in_transaction(connection, self._migrate, write=True)
            except sqlite3.OperationalError as exc:
                connection.close()
                if not os.path.isfile(self._path) or getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _NOT_WRITABLE:
                    raise
                connection = self._read_only(exc)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _read_only(self, why: sqlite3.OperationalError) -> sqlite3.Connection:
        """A read-only connection to an existing file this process may not write (its mode, a
        read-only mount): reads work, every write fails with :class:`~rxllm.StoreError`.

        ``mode=ro`` first; a WAL file whose directory is not writable either (no ``-shm`` can be
        made) is opened ``immutable``, which is exact as long as nobody writes the file meanwhile.
        """
        uri = "file:" + urllib.parse.quote(os.path.abspath(self._path)) + "?mode=ro"
        last: sqlite3.Error = why
        for suffix in ("", "&immutable=1"):
            connection = sqlite3.connect(uri + suffix, uri=True, timeout=self._busy_timeout, isolation_level=None)
            try:
                self._in_transaction(connection, self._check_schema, write=False)
            except sqlite3.Error as exc:
                connection.close()
                last = exc
                continue
            return connection
        raise last

    def _check_schema(self, connection: SqlConnection) -> None:
        """The recorded schema version of a file opened read-only (nothing is created or migrated)."""
        row = connection.execute(self._SQL.schema_version).fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise StoreError(
                f"the read-only session database has schema version {row[0] if row else 'none'}, "
                f"not {SCHEMA_VERSION}: it cannot be migrated without write access"
            )

    def _transaction(self, work: Callable[[SqlConnection], T], *, write: bool) -> T:
        return self._in_transaction(self._conn(), work, write=write)

    @staticmethod
    def _in_transaction(connection: sqlite3.Connection, work: Callable[[SqlConnection], T], *, write: bool) -> T:
        connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")  # IMMEDIATE: take the write lock up front
        try:
            result = work(connection)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return result
