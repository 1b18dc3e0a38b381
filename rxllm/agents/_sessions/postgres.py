"""``PostgresSessionService``: sessions in PostgreSQL, for many processes on many hosts.

Needs the optional extra ``rxllm[postgres]`` (psycopg 3 and psycopg_pool); importing this module
does not, constructing the service does. The tables are created (or migrated) on first use, under
an advisory lock, and the schema version is recorded in ``rxllm_meta``.

Appends lock the session's row (``SELECT ... FOR UPDATE``), then the user's and the app's state
rows when the delta touches them, always in that order (no deadlocks), and store the event with
its state delta in one transaction: any number of processes can append to one session; each
append is applied to the state as committed (:class:`BaseSessionService`'s merge rule).

Every call ends in bounded time, also against a server that stopped answering (a hung host, a
dropped network, a ``SIGSTOP``): connecting is bounded by libpq's ``connect_timeout``, idle
connections send TCP keepalives, the server cancels a statement past ``statement_timeout``, and,
for a server that cancels nothing because it is frozen, a watchdog shuts the socket of a call
whose transaction passes ``statement_timeout`` plus one second down: the call fails with
:class:`~rxllm.StoreError` and its connection is dropped from the pool, so the next call gets a
fresh one.
"""

from __future__ import annotations

import heapq
import itertools
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..._core.errors import ConfigurationError, StoreError
from ..._core.threads import daemon_thread, thread_pool
from .sql import SCHEMA_VERSION, Dialect, SqlConnection, SqlSessionService

if TYPE_CHECKING:
    import psycopg_pool

__all__ = ["SCHEMA_VERSION", "PostgresSessionService"]

T = TypeVar("T")

_LOCK_ID = 0x72786C6C6D  # pg_advisory_xact_lock key serialising schema creation ("rxllm")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rxllm_meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS rxllm_sessions (
        app_name text NOT NULL, user_id text NOT NULL, id text NOT NULL,
        state jsonb NOT NULL, create_time double precision NOT NULL, update_time double precision NOT NULL,
        PRIMARY KEY (app_name, user_id, id))""",
    """CREATE TABLE IF NOT EXISTS rxllm_app_states (
        app_name text PRIMARY KEY, state jsonb NOT NULL, update_time double precision NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS rxllm_user_states (
        app_name text NOT NULL, user_id text NOT NULL, state jsonb NOT NULL,
        update_time double precision NOT NULL, PRIMARY KEY (app_name, user_id))""",
    """CREATE TABLE IF NOT EXISTS rxllm_events (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        app_name text NOT NULL, user_id text NOT NULL, session_id text NOT NULL,
        id text NOT NULL, invocation_id text NOT NULL, author text NOT NULL,
        timestamp double precision NOT NULL, event text NOT NULL,
        FOREIGN KEY (app_name, user_id, session_id) REFERENCES rxllm_sessions (app_name, user_id, id)
            ON DELETE CASCADE)""",
    "CREATE INDEX IF NOT EXISTS rxllm_events_by_session ON rxllm_events (app_name, user_id, session_id, seq)",
)

_MISSING_DRIVER = (
    "PostgresSessionService needs psycopg 3 and psycopg_pool, which are not installed: pip install 'rxllm[postgres]'"
)


_KEEPALIVES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}
"""libpq's TCP keepalive settings (a dead peer of an idle connection is noticed within about a
minute); a setting the DSN spells out itself wins."""

_WATCHDOG_GRACE = 1.0
"""Seconds past ``statement_timeout`` before the client shuts a call's socket down: the server's
own cancellation, when it can still act, comes first and gives the clearer error."""


class _Watchdog:
    """Shuts down the socket of a transaction that runs past its deadline (one daemon thread).

    ``arm`` returns a token; ``disarm`` must be called before the connection's socket is closed
    or reused. The shutdown happens under the lock that ``disarm`` takes, so it never acts on a
    file descriptor that was closed and reused meanwhile.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._armed: dict[int, int] = {}  # token -> file descriptor
        self._deadlines: list[tuple[float, int]] = []
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, fd: int, seconds: float) -> int:
        with self._lock:
            token = next(self._tokens)
            self._armed[token] = fd
            heapq.heappush(self._deadlines, (time.monotonic() + seconds, token))
            if self._thread is None:
                self._thread = daemon_thread(self._watch, "rxllm-postgres-watchdog")
            self._lock.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._lock:
            self._armed.pop(token, None)

    def _watch(self) -> None:
        with self._lock:
            while True:
                while self._deadlines and self._deadlines[0][1] not in self._armed:
                    heapq.heappop(self._deadlines)
                if not self._deadlines:
                    self._lock.wait()
                    continue
                deadline, token = self._deadlines[0]
                left = deadline - time.monotonic()
                if left > 0:
                    self._lock.wait(left)
                    continue
                heapq.heappop(self._deadlines)
                fd = self._armed.pop(token)
                try:
                    shut = socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM)  # a dup: closing it keeps fd
                    try:
                        shut.shutdown(socket.SHUT_RDWR)
                    finally:
                        shut.close()
                except OSError:
                    pass  # already closed by the peer: the blocked read has its error


def _safe_target(dsn: str) -> str:
    """host:port/dbname of a DSN, for reprs and messages (never the password)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:
        return "<unparsable dsn>"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


class PostgresSessionService(SqlSessionService):
    """Sessions in PostgreSQL: every process stateless, as many processes and hosts as you like.

    Args:
        dsn: a libpq connection string or URL (``postgresql://user@host:5432/db``). Never shown
            in reprs, logs or errors.
        min_size: connections the pool keeps open.
        max_size: the most connections (and worker threads) the service uses at once.
        timeout: seconds to wait for a free connection before failing with
            :class:`~rxllm.StoreError`.
        connect_timeout: seconds one connection attempt may take (libpq's ``connect_timeout``,
            rounded up to whole seconds, at least 2).
        statement_timeout: seconds one call's statements may run: the server cancels a
            statement past it, and a call whose transaction is still running one second later
            (a frozen server) has its socket shut down. Either way a :class:`~rxllm.StoreError`.
            ``None``: no limit.

    Raises:
        ConfigurationError: psycopg 3 or psycopg_pool is not installed (``rxllm[postgres]``).

    Each method returns a cold Observable: subscribing submits the work to the service's worker
    threads and returns at once; the item is emitted from a worker thread. Disposing before the
    work started cancels it; a started transaction completes (an append is never half stored).
    The tables are created on the first call. A lost connection (server restart, a terminated
    backend) fails the call in flight with :class:`~rxllm.StoreError` (its transaction rolled
    back) and the next call gets a fresh connection. :meth:`close` (or ``with``) closes the pool.

    >>> from rxllm.agents import PostgresSessionService
    >>> service = PostgresSessionService("postgresql://app@db.internal:5432/chat")  # doctest: +SKIP
    >>> session = service.create_session("shop", "u1").run()  # doctest: +SKIP
    """

    _DIALECT = Dialect(
        "PostgreSQL",
        _SCHEMA,
        placeholder="%s",
        read_state="state::text",
        write_state="?::jsonb",
        empty_state="'{}'::jsonb",
        float_param="?::double precision",
        lock=" FOR UPDATE",
        no_limit=None,
    )

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        statement_timeout: float | None = 30.0,
    ) -> None:
        try:
            import psycopg_pool
        except ImportError as exc:
            raise ConfigurationError(_MISSING_DRIVER) from exc
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ConfigurationError(f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}")
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout),
                            ("statement_timeout", 1.0 if statement_timeout is None else statement_timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or math.isinf(value):
                raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
        self._target = _safe_target(dsn)
        self._statement_timeout = statement_timeout
        self._check_timeout = max(2, math.ceil(connect_timeout))
        connect: dict[str, Any] = {"autocommit": True, **_connection_settings(dsn, connect_timeout, statement_timeout)}
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            check=self._check,
            kwargs=connect,
            name="rxllm-sessions",
        )
        self._executor = thread_pool(max_size, "rxllm-postgres")
        self._ready_lock = threading.Lock()
        self._ready = False
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresSessionService({self._target!r})"

    def close(self) -> None:
        """Finish queued work, then close the pool (idempotent). Later calls fail with StoreError."""
        with self._ready_lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
        self._pool.close()

    # -- connections (worker threads only) -------------------------------------------------------

    def _ensure_ready(self) -> None:
        with self._ready_lock:
            if self._ready:
                return
            if self._closed:
                raise StoreError("the PostgreSQL session store is closed")
            self._pool.open(wait=False)
            with self._pool.connection() as connection, connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
                self._migrate(connection)
            self._ready = True

    def _check(self, connection: Any) -> None:
        """The pool's check of an idle connection before it is handed out, bounded like a connect."""
        import psycopg_pool

        token = _WATCHDOG.arm(connection.fileno(), self._check_timeout)
        try:
            psycopg_pool.ConnectionPool.check_connection(connection)
        finally:
            _WATCHDOG.disarm(token)

    def _transaction(self, work: Callable[[SqlConnection], T], *, write: bool) -> T:
        self._ensure_ready()
        with self._pool.connection() as connection:
            token = None
            if self._statement_timeout is not None:
                token = _WATCHDOG.arm(connection.fileno(), self._statement_timeout + _WATCHDOG_GRACE)
            try:
                with connection.transaction():
                    if not write:
                        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    return work(connection)
            finally:
                if token is not None:
                    _WATCHDOG.disarm(token)


_WATCHDOG = _Watchdog()


def _connection_settings(dsn: str, connect_timeout: float, statement_timeout: float | None) -> dict[str, str]:
    """libpq parameters bounding a connection: connect timeout, keepalives, statement timeout.

    A keepalive setting the DSN spells out itself is kept; the two timeouts are the arguments'.
    """
    try:
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(dsn)
    except Exception:
        given = {}
    settings = {name: value for name, value in _KEEPALIVES.items() if name not in given}
    settings["connect_timeout"] = str(max(2, math.ceil(connect_timeout)))
    if statement_timeout is not None:
        options = str(given.get("options", ""))
        settings["options"] = f"{options} -c statement_timeout={math.ceil(statement_timeout * 1000)}".strip()
    return settings
