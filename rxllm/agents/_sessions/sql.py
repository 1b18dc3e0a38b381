"""What the SQLite and PostgreSQL session stores share (private): the tables' queries and the merge rule.

:class:`SqlSessionService` implements every :class:`BaseSessionService` method once, as SQL run
in one transaction on a worker thread; a store subclasses it with its :class:`Dialect` (placeholders,
JSON casts, row locks, its DDL) and its own connections and transactions (``_transaction``,
``close``). Events are stored as JSON by alias, state scopes as JSON objects; the schema version is
recorded in ``rxllm_meta``.
"""

from __future__ import annotations

import abc
import json
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self, TypeVar

from pydantic import JsonValue, ValidationError

from ..._core.errors import RxLlmError, StoreError
from ..._core.json_codec import without_lone_surrogates
from ..._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from ..._rx.direct import emit_now
from ..._rx.offthread import call_off_thread
from .base import (
    BaseSessionService,
    GetSessionConfig,
    Session,
    event_to_store,
    merged_state,
    missing_session_error,
    taken_id_error,
)
from .event import Event
from .state import apply_state_delta

__all__ = [
    "SCHEMA_VERSION",
    "Dialect",
    "SqlConnection",
    "SqlSessionService",
    "dumps_state",
    "event_from_json",
    "event_to_json",
    "loads_state",
]

T = TypeVar("T")

SCHEMA_VERSION = 1
"""The version of the tables the stores write (recorded in ``rxllm_meta``)."""

_SHARED_SCOPES = frozenset({"app", "user"})


def event_to_json(event: Event) -> str:
    """An event as the stores keep it: JSON by alias (explicit, whatever ``model_dump``'s default)."""
    return event.model_dump_json(by_alias=True)


def event_from_json(text: str | bytes) -> Event:
    """An event read back from a store; a row that is not a valid event is a :class:`~rxllm.StoreError`.

    A row holding a lone surrogate (``"\\udce9"``: written by another program, or by hand) is read
    with U+FFFD in its place, the rule every append follows, so such a session stays usable.
    """
    try:
        return Event.model_validate_json(text, by_alias=True)
    except ValidationError as exc:
        if "surrogate" in str(exc):
            try:
                return Event.model_validate(without_lone_surrogates(json.loads(text)), by_alias=True)
            except (ValueError, ValidationError):
                pass
        raise StoreError(f"a stored event could not be read back: {exc.error_count()} validation error(s)") from exc


def dumps_state(state: dict[str, JsonValue]) -> str:
    """A state scope as stored (JSON text)."""
    return json.dumps(state, separators=(",", ":"), ensure_ascii=False)


def loads_state(text: str | bytes | None) -> dict[str, JsonValue]:
    """A stored state scope (an empty dict for NULL)."""
    if text is None:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise StoreError("a stored state is not a JSON object")
    return value


class SqlCursor(Protocol):
    """What the stores use of a DB-API cursor (``sqlite3`` and ``psycopg`` both fit)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SqlConnection(Protocol):
    """What the stores use of a connection: ``execute`` returning a cursor."""

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> SqlCursor: ...


@dataclass(frozen=True)
class Dialect:
    """What one database spells differently; :class:`SqlSessionService` builds its statements from it.

    Args:
        database: the database's name in error messages (``"SQLite"``).
        schema: the DDL creating the five tables (``IF NOT EXISTS``), run in order on first use.
        placeholder: the driver's parameter marker (``"?"`` or ``"%s"``).
        read_state: a state column as JSON text in a ``SELECT``.
        write_state: a JSON text parameter stored into a state column.
        empty_state: an empty state as an SQL literal.
        float_param: a float parameter that may be NULL (typed where the database needs it).
        lock: appended to the ``SELECT`` of rows an append changes (``" FOR UPDATE"`` where rows lock).
        no_limit: the ``LIMIT`` parameter meaning "all rows".
    """

    database: str
    schema: tuple[str, ...]
    placeholder: str = "?"
    read_state: str = "state"
    write_state: str = "?"
    empty_state: str = "'{}'"
    float_param: str = "?"
    lock: str = ""
    no_limit: int | None = -1

    def sql(self, template: str) -> str:
        """``template`` in this dialect: its ``{state}``, ``{json}``, ``{empty}``, ``{float}``, ``{lock}`` and ``?``."""
        text = template.format(
            state=self.read_state, json=self.write_state, empty=self.empty_state, float=self.float_param, lock=self.lock
        )
        return text.replace("?", self.placeholder)


_SESSION = "WHERE app_name = ? AND user_id = ? AND id = ?"


class _Statements:
    """Every statement the stores run, in one dialect (built once per store class)."""

    def __init__(self, dialect: Dialect) -> None:
        sql = dialect.sql
        self.schema_version = "SELECT value FROM rxllm_meta WHERE key = 'schema_version'"
        self.record_schema_version = sql("INSERT INTO rxllm_meta (key, value) VALUES ('schema_version', ?)")
        self.insert_session = sql(
            "INSERT INTO rxllm_sessions (app_name, user_id, id, state, create_time, update_time) "
            "VALUES (?, ?, ?, {empty}, ?, ?) ON CONFLICT DO NOTHING"
        )
        self.session = sql("SELECT {state}, update_time FROM rxllm_sessions " + _SESSION)
        self.session_state_for_update = sql("SELECT {state} FROM rxllm_sessions " + _SESSION + "{lock}")
        self.update_session = sql("UPDATE rxllm_sessions SET state = {json}, update_time = ? " + _SESSION)
        self.touch_session = sql("UPDATE rxllm_sessions SET update_time = ? " + _SESSION)
        self.list_sessions = sql(
            "SELECT id, {state}, update_time FROM rxllm_sessions WHERE app_name = ? AND user_id = ? "
            "ORDER BY create_time, id"
        )
        self.delete_session = sql("DELETE FROM rxllm_sessions " + _SESSION)
        self.delete_events = sql("DELETE FROM rxllm_events WHERE app_name = ? AND user_id = ? AND session_id = ?")
        self.insert_event = sql(
            "INSERT INTO rxllm_events (app_name, user_id, session_id, id, invocation_id, author, timestamp, event) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self.events = sql(
            "SELECT event FROM (SELECT seq, timestamp, event FROM rxllm_events "
            "WHERE app_name = ? AND user_id = ? AND session_id = ? ORDER BY seq DESC LIMIT ?) AS recent "
            "WHERE {float} IS NULL OR timestamp >= ? ORDER BY seq"
        )
        user = "FROM rxllm_user_states WHERE app_name = ? AND user_id = ?"
        app = "FROM rxllm_app_states WHERE app_name = ?"
        self.user_state = sql("SELECT {state} " + user)
        self.user_state_for_update = sql("SELECT {state} " + user + "{lock}")
        self.app_state = sql("SELECT {state} " + app)
        self.app_state_for_update = sql("SELECT {state} " + app + "{lock}")
        self.create_user_state = sql(
            "INSERT INTO rxllm_user_states (app_name, user_id, state, update_time) VALUES (?, ?, {empty}, ?) "
            "ON CONFLICT DO NOTHING"
        )
        self.create_app_state = sql(
            "INSERT INTO rxllm_app_states (app_name, state, update_time) VALUES (?, {empty}, ?) ON CONFLICT DO NOTHING"
        )
        self.write_user_state = sql(
            "INSERT INTO rxllm_user_states (app_name, user_id, state, update_time) VALUES (?, ?, {json}, ?) "
            "ON CONFLICT (app_name, user_id) DO UPDATE SET state = excluded.state, update_time = excluded.update_time"
        )
        self.write_app_state = sql(
            "INSERT INTO rxllm_app_states (app_name, state, update_time) VALUES (?, {json}, ?) "
            "ON CONFLICT (app_name) DO UPDATE SET state = excluded.state, update_time = excluded.update_time"
        )
        self.events_no_limit = dialect.no_limit
        self.locks_rows = bool(dialect.lock)


class SqlSessionService(BaseSessionService):
    """A session store on SQL tables: every method is one transaction on the subclass's worker threads.

    A subclass sets ``_DIALECT`` and ``_executor`` and implements :meth:`_transaction` and
    :meth:`close`; it calls :meth:`_migrate` inside a transaction before its first statement.
    Errors that are not already an :class:`~rxllm.RxLlmError` reach subscribers as
    :class:`~rxllm.StoreError` naming the database (never a connection string).
    """

    _DIALECT: ClassVar[Dialect]
    _SQL: ClassVar[_Statements]
    _executor: Executor

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_DIALECT" in cls.__dict__:
            cls._SQL = _Statements(cls._DIALECT)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None:
        """Finish queued work, then close the connections (idempotent). Later calls fail with StoreError."""

    # -- the subclass's transactions (worker threads only) ---------------------------------------

    @abc.abstractmethod
    def _transaction(self, work: Callable[[SqlConnection], T], *, write: bool) -> T:
        """Run ``work`` in one transaction (committed when it returns, rolled back when it raises).

        ``write=False`` promises ``work`` only reads (a database may then take no write lock).
        """

    def _migrate(self, connection: SqlConnection) -> None:
        """Create the tables if missing and check the recorded schema version (in the caller's transaction)."""
        for statement in self._DIALECT.schema:
            connection.execute(statement)
        row = connection.execute(self._SQL.schema_version).fetchone()
        if row is None:
            connection.execute(self._SQL.record_schema_version, (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"the session database has schema version {row[0]}, newer than this rxllm's "
                f"{SCHEMA_VERSION}: upgrade rxllm"
            )
        # versions below SCHEMA_VERSION would be migrated here, step by step

    def _store_error(self, exc: Exception) -> RxLlmError:
        return StoreError(f"{self._DIALECT.database} session store failed: {type(exc).__name__}: {exc}".strip())

    def _run(self, work: Callable[[SqlConnection], T | None], *, write: bool) -> AwaitableObservable[T]:
        def supplier() -> T | None:
            return self._transaction(work, write=write)

        return call_off_thread(self._executor, supplier, map_error=self._store_error)

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

        def create(connection: SqlConnection) -> Session:
            sid = session_id if session_id is not None else str(uuid.uuid4())
            now = time.time()
            key = (app_name, user_id, sid)
            if connection.execute(self._SQL.insert_session, (*key, now, now)).rowcount == 0:
                raise taken_id_error(app_name, user_id, sid)
            own: dict[str, JsonValue] = {}
            app, user, changed = self._apply(connection, app_name, user_id, own, initial, now)
            if "session" in changed:
                connection.execute(self._SQL.update_session, (dumps_state(own), now, *key))
            stored_app, stored_user = self._read_scopes(connection, app_name, user_id, _SHARED_SCOPES - changed)
            return Session.model_construct(
                id=sid,
                app_name=app_name,
                user_id=user_id,
                state=merged_state(
                    own, app if "app" in changed else stored_app, user if "user" in changed else stored_user
                ),
                events=(),
                last_update_time=now,
            )

        return self._run(create, write=True)

    def get_session(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> MaybeObservable[Session]:
        """Emit a snapshot, or nothing; see :meth:`BaseSessionService.get_session`."""
        recent = None if config is None else config.num_recent_events
        limit = self._SQL.events_no_limit if recent is None else recent
        after = None if config is None else config.after_timestamp

        def get(connection: SqlConnection) -> Session | None:
            key = (app_name, user_id, session_id)
            row = connection.execute(self._SQL.session, key).fetchone()
            if row is None:
                return None
            app, user = self._read_scopes(connection, app_name, user_id)
            rows = connection.execute(self._SQL.events, (*key, limit, after, after)).fetchall()
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

        def listing(connection: SqlConnection) -> list[Session]:
            app, user = self._read_scopes(connection, app_name, user_id)
            rows = connection.execute(self._SQL.list_sessions, (app_name, user_id)).fetchall()
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

        def delete(connection: SqlConnection) -> None:
            key = (app_name, user_id, session_id)
            connection.execute(self._SQL.delete_events, key)
            connection.execute(self._SQL.delete_session, key)

        return MaybeObservable(self._run(delete, write=True))

    def append_event(self, session: Session, event: Event) -> AwaitableObservable[Event]:
        """Store a non-partial event and its state delta in one transaction; see ``BaseSessionService``."""
        if event.partial:
            return awaitable(emit_now(event))  # not stored; emitted during subscribe, as the memory store does
        stored_event = event_to_store(event)
        payload = event_to_json(stored_event)
        app_name, user_id, session_id = session.app_name, session.user_id, session.id
        key = (app_name, user_id, session_id)
        now = stored_event.timestamp

        def append(connection: SqlConnection) -> Event:
            row = connection.execute(self._SQL.session_state_for_update, key).fetchone()
            if row is None:
                raise missing_session_error(session)
            own = loads_state(row[0])
            changed = self._apply(connection, app_name, user_id, own, stored_event.actions.state_delta, now)[2]
            connection.execute(
                self._SQL.insert_event,
                (*key, stored_event.id, stored_event.invocation_id, stored_event.author, now, payload),
            )
            if "session" in changed:
                connection.execute(self._SQL.update_session, (dumps_state(own), now, *key))
            else:
                connection.execute(self._SQL.touch_session, (now, *key))
            return stored_event

        return self._run(append, write=True)

    # -- state scopes ----------------------------------------------------------------------------

    def _apply(
        self,
        connection: SqlConnection,
        app_name: str,
        user_id: str,
        own: dict[str, JsonValue],
        delta: Mapping[str, JsonValue],
        now: float,
    ) -> tuple[dict[str, JsonValue], dict[str, JsonValue], set[str]]:
        """Apply ``delta`` to ``own`` and to the app's and user's stored scopes; write those back.

        Reads (and, where rows lock, locks: the user's row, then the app's) only the scopes the
        delta changes, so concurrent appends merge key by key into the state as committed.
        Returns the app and user scopes as now stored (empty when unchanged) and the changed scopes.
        """
        changed = apply_state_delta(delta, app={}, user={}, session={})  # which scopes: nothing stored yet
        shared = changed & _SHARED_SCOPES
        if not shared:
            apply_state_delta(delta, app={}, user={}, session=own)
            return {}, {}, changed
        sql = self._SQL
        if sql.locks_rows:  # FOR UPDATE locks only rows that exist: create them first
            if "user" in shared:
                connection.execute(sql.create_user_state, (app_name, user_id, now))
            if "app" in shared:
                connection.execute(sql.create_app_state, (app_name, now))
        app, user = self._read_scopes(connection, app_name, user_id, shared, for_update=True)
        apply_state_delta(delta, app=app, user=user, session=own)
        if "user" in shared:
            connection.execute(sql.write_user_state, (app_name, user_id, dumps_state(user), now))
        if "app" in shared:
            connection.execute(sql.write_app_state, (app_name, dumps_state(app), now))
        return app, user, changed

    def _read_scopes(
        self,
        connection: SqlConnection,
        app_name: str,
        user_id: str,
        scopes: Collection[str] = _SHARED_SCOPES,
        *,
        for_update: bool = False,
    ) -> tuple[dict[str, JsonValue], dict[str, JsonValue]]:
        """The app's and the user's stored state (empty for a scope not in ``scopes``), the user's read first."""
        sql = self._SQL
        user: dict[str, JsonValue] = {}
        app: dict[str, JsonValue] = {}
        if "user" in scopes:
            query = sql.user_state_for_update if for_update else sql.user_state
            user_row = connection.execute(query, (app_name, user_id)).fetchone()
            user = loads_state(user_row[0] if user_row else None)
        if "app" in scopes:
            query = sql.app_state_for_update if for_update else sql.app_state
            app_row = connection.execute(query, (app_name,)).fetchone()
            app = loads_state(app_row[0] if app_row else None)
        return app, user
