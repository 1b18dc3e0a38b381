"""``PostgresSessionService``: sessions in PostgreSQL, for many processes on many hosts.

Needs the optional extra ``rxllm[postgres]`` (psycopg 3 and psycopg_pool); importing this module
does not, constructing the service does. The tables are created (or migrated) on first use, under
an advisory lock, and the schema version is recorded in ``rxllm_meta``.

Appends lock the session's row (``SELECT ... FOR UPDATE``), then the user's and the app's state
rows when the delta touches them, always in that order (no deadlocks), and store the event with
its state delta in one transaction: any number of processes can append to one session; each
append is applied to the state as committed (:class:`BaseSessionService`'s merge rule).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..._core.errors import ConfigurationError, StoreError
from ..._core.threads import thread_pool
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

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 8, timeout: float = 30.0) -> None:
        try:
            import psycopg_pool
        except ImportError as exc:
            raise ConfigurationError(_MISSING_DRIVER) from exc
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ConfigurationError(f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}")
        if timeout <= 0:
            raise ConfigurationError(f"timeout must be positive, got {timeout!r}")
        self._target = _safe_target(dsn)
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            check=psycopg_pool.ConnectionPool.check_connection,
            kwargs={"autocommit": True},
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

    def _transaction(self, work: Callable[[SqlConnection], T], *, write: bool) -> T:
        self._ensure_ready()
        with self._pool.connection() as connection, connection.transaction():
            if not write:
                connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return work(connection)
