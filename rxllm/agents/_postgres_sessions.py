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
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

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

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["SCHEMA_VERSION", "PostgresSessionService"]

T = TypeVar("T")

SCHEMA_VERSION = 1
"""The version of the tables this module writes (recorded in ``rxllm_meta``)."""

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


def _store_error(exc: Exception) -> RxLlmError:
    return StoreError(f"PostgreSQL session store failed: {type(exc).__name__}: {exc}".strip())


def _safe_target(dsn: str) -> str:
    """host:port/dbname of a DSN, for reprs and messages (never the password)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:
        return "<unparsable dsn>"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


class PostgresSessionService(BaseSessionService):
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
        self._executor = ThreadPoolExecutor(max_workers=max_size, thread_name_prefix="rxllm-postgres")
        self._ready_lock = threading.Lock()
        self._ready = False
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresSessionService({self._target!r})"

    def __enter__(self) -> PostgresSessionService:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

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
                for statement in _SCHEMA:
                    connection.execute(statement)
                row = connection.execute("SELECT value FROM rxllm_meta WHERE key = 'schema_version'").fetchone()
                if row is None:
                    connection.execute(
                        "INSERT INTO rxllm_meta (key, value) VALUES ('schema_version', %s)", (str(SCHEMA_VERSION),)
                    )
                elif int(row[0]) > SCHEMA_VERSION:
                    raise StoreError(
                        f"the session database has schema version {row[0]}, newer than this rxllm's "
                        f"{SCHEMA_VERSION}: upgrade rxllm"
                    )
                # versions below SCHEMA_VERSION would be migrated here, step by step
            self._ready = True

    def _run(
        self, work: Callable[[psycopg.Connection[Any]], T | None], *, read_only: bool = False
    ) -> AwaitableObservable[T]:
        def supplier() -> T | None:
            self._ensure_ready()
            with self._pool.connection() as connection, connection.transaction():
                if read_only:
                    connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                return work(connection)

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

        def create(connection: psycopg.Connection[Any]) -> Session:
            sid = session_id if session_id is not None else str(uuid.uuid4())
            now = time.time()
            inserted = connection.execute(
                "INSERT INTO rxllm_sessions (app_name, user_id, id, state, create_time, update_time) "
                "VALUES (%s, %s, %s, '{}'::jsonb, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (app_name, user_id, sid, now, now),
            ).fetchone()
            if inserted is None:
                raise taken_id_error(app_name, user_id, sid)
            own = self._apply(connection, app_name, user_id, {}, initial, now)[2]
            connection.execute(
                "UPDATE rxllm_sessions SET state = %s::jsonb WHERE app_name = %s AND user_id = %s AND id = %s",
                (dumps_state(own), app_name, user_id, sid),
            )
            app, user = self._read_scopes(connection, app_name, user_id, lock=False)
            return Session.model_construct(
                id=sid,
                app_name=app_name,
                user_id=user_id,
                state=merged_state(own, app, user),
                events=(),
                last_update_time=now,
            )

        return self._run(create)

    def get_session(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> MaybeObservable[Session]:
        """Emit a snapshot, or nothing; see :meth:`BaseSessionService.get_session`."""
        limit = None if config is None else config.num_recent_events
        after = None if config is None else config.after_timestamp

        def get(connection: psycopg.Connection[Any]) -> Session | None:
            row = connection.execute(
                "SELECT state::text, update_time FROM rxllm_sessions WHERE app_name = %s AND user_id = %s AND id = %s",
                (app_name, user_id, session_id),
            ).fetchone()
            if row is None:
                return None
            app, user = self._read_scopes(connection, app_name, user_id, lock=False)
            rows = connection.execute(
                "SELECT event FROM (SELECT seq, timestamp, event FROM rxllm_events "
                "WHERE app_name = %s AND user_id = %s AND session_id = %s ORDER BY seq DESC LIMIT %s) AS recent "
                "WHERE %s::double precision IS NULL OR timestamp >= %s ORDER BY seq",
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

        return MaybeObservable(self._run(get, read_only=True))

    def list_sessions(self, app_name: str, user_id: str) -> AwaitableObservable[list[Session]]:
        """Emit the user's sessions without events; see :meth:`BaseSessionService.list_sessions`."""

        def listing(connection: psycopg.Connection[Any]) -> list[Session]:
            app, user = self._read_scopes(connection, app_name, user_id, lock=False)
            rows = connection.execute(
                "SELECT id, state::text, update_time FROM rxllm_sessions WHERE app_name = %s AND user_id = %s "
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

        return self._run(listing, read_only=True)

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> MaybeObservable[None]:
        """Delete the session and (cascading) its events; see :meth:`BaseSessionService.delete_session`."""

        def delete(connection: psycopg.Connection[Any]) -> None:
            connection.execute(
                "DELETE FROM rxllm_sessions WHERE app_name = %s AND user_id = %s AND id = %s",
                (app_name, user_id, session_id),
            )

        return MaybeObservable(self._run(delete))

    def append_event(self, session: Session, event: Event) -> AwaitableObservable[Event]:
        """Store a non-partial event and its state delta in one transaction; see ``BaseSessionService``."""
        if event.partial:
            return awaitable(emit_now(event))
        stored_event = event_to_store(event)
        payload = event_to_json(stored_event)
        app_name, user_id, session_id = session.app_name, session.user_id, session.id

        def append(connection: psycopg.Connection[Any]) -> Event:
            row = connection.execute(
                "SELECT state::text FROM rxllm_sessions WHERE app_name = %s AND user_id = %s AND id = %s FOR UPDATE",
                (app_name, user_id, session_id),
            ).fetchone()
            if row is None:
                raise missing_session_error(session)
            own = loads_state(row[0])
            delta = stored_event.actions.state_delta
            touched = self._apply(connection, app_name, user_id, own, delta, stored_event.timestamp)[3]
            connection.execute(
                "INSERT INTO rxllm_events (app_name, user_id, session_id, id, invocation_id, author, timestamp, event) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
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
            if "session" in touched:
                connection.execute(
                    "UPDATE rxllm_sessions SET state = %s::jsonb, update_time = %s "
                    "WHERE app_name = %s AND user_id = %s AND id = %s",
                    (dumps_state(own), stored_event.timestamp, app_name, user_id, session_id),
                )
            else:
                connection.execute(
                    "UPDATE rxllm_sessions SET update_time = %s WHERE app_name = %s AND user_id = %s AND id = %s",
                    (stored_event.timestamp, app_name, user_id, session_id),
                )
            return stored_event

        return self._run(append)

    # -- state scopes ----------------------------------------------------------------------------

    def _apply(
        self,
        connection: psycopg.Connection[Any],
        app_name: str,
        user_id: str,
        own: dict[str, JsonValue],
        delta: Mapping[str, JsonValue],
        now: float,
    ) -> tuple[dict[str, JsonValue], dict[str, JsonValue], dict[str, JsonValue], set[str]]:
        """Lock the scopes the delta touches (user, then app), apply it, write them back."""
        touched = apply_state_delta(delta, app={}, user={}, session={})  # which scopes: nothing stored yet
        app: dict[str, JsonValue] = {}
        user: dict[str, JsonValue] = {}
        if "user" in touched:
            connection.execute(
                "INSERT INTO rxllm_user_states (app_name, user_id, state, update_time) "
                "VALUES (%s, %s, '{}'::jsonb, %s) ON CONFLICT DO NOTHING",
                (app_name, user_id, now),
            )
        if "app" in touched:
            connection.execute(
                "INSERT INTO rxllm_app_states (app_name, state, update_time) VALUES (%s, '{}'::jsonb, %s) "
                "ON CONFLICT DO NOTHING",
                (app_name, now),
            )
        if touched - {"session"}:
            app, user = self._read_scopes(connection, app_name, user_id, lock=True, touched=touched)
        apply_state_delta(delta, app=app, user=user, session=own)
        if "user" in touched:
            connection.execute(
                "UPDATE rxllm_user_states SET state = %s::jsonb, update_time = %s WHERE app_name = %s AND user_id = %s",
                (dumps_state(user), now, app_name, user_id),
            )
        if "app" in touched:
            connection.execute(
                "UPDATE rxllm_app_states SET state = %s::jsonb, update_time = %s WHERE app_name = %s",
                (dumps_state(app), now, app_name),
            )
        return app, user, own, touched

    @staticmethod
    def _read_scopes(
        connection: psycopg.Connection[Any],
        app_name: str,
        user_id: str,
        *,
        lock: bool,
        touched: set[str] | None = None,
    ) -> tuple[dict[str, JsonValue], dict[str, JsonValue]]:
        suffix = " FOR UPDATE" if lock else ""
        user: dict[str, JsonValue] = {}
        app: dict[str, JsonValue] = {}
        if touched is None or "user" in touched:
            user_row = connection.execute(
                "SELECT state::text FROM rxllm_user_states WHERE app_name = %s AND user_id = %s" + suffix,
                (app_name, user_id),
            ).fetchone()
            user = loads_state(user_row[0] if user_row else None)
        if touched is None or "app" in touched:
            app_row = connection.execute(
                "SELECT state::text FROM rxllm_app_states WHERE app_name = %s" + suffix, (app_name,)
            ).fetchone()
            app = loads_state(app_row[0] if app_row else None)
        return app, user
