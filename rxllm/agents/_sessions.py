"""Sessions: ``Session``, ``BaseSessionService`` and ``InMemorySessionService``.

A session service stores the events of a conversation. Its methods return cold Observables of
one item (or none), as ADK Java's ``Single`` / ``Maybe`` / ``Completable``. ``append_event`` keeps
the seed's first check: a partial event is returned unchanged and never stored.

>>> from reactivex import operators as ops
>>> from rxllm import Content, Part
>>> from rxllm.agents import Event, InMemorySessionService
>>> service = InMemorySessionService()
>>> session = service.create_session("shop", "u1", session_id="s1").run()
>>> partial = Event(author="bot", partial=True, content=Content(role="model", parts=(Part.from_text("Th"),)))
>>> service.append_event(session, partial).run() is partial
True
>>> stored = service.append_event(session, Event(author="user")).run()
>>> len(service.get_session("shop", "u1", "s1").run().events)
1
"""

from __future__ import annotations

import abc
import copy
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import reactivex
from pydantic import Field, JsonValue

from .._aio import AwaitableObservable, MaybeObservable, awaitable
from .._errors import ConfigurationError
from .._types import _Model
from ._event import Event
from ._rx import call_now, emit_now, nothing_now
from ._state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX

__all__ = ["BaseSessionService", "InMemorySessionService", "Session"]


class Session(_Model):
    """An immutable snapshot of a conversation: its ids, state and stored events.

    Snapshots never change: a later ``append_event`` (by anyone) is seen only by fetching the
    session again. ``state`` is the merged view (session keys plus the app's ``app:`` keys and
    the user's ``user:`` keys); a snapshot's ``state`` dict is its own copy, so mutating it changes
    nothing in the service. Partial events are never among ``events``.
    """

    id: str
    app_name: str
    user_id: str
    state: dict[str, JsonValue] = Field(default_factory=dict)
    events: tuple[Event, ...] = ()
    last_update_time: float = 0.0


class BaseSessionService(abc.ABC):
    """Where sessions live. Every method returns a cold Observable: subscribing does the work.

    Implementations must keep ``append_event``'s contract: a partial event is emitted back
    unchanged and not stored; a stored event's ``actions.state_delta`` is applied to the state
    (``temp:`` keys dropped, ``app:`` / ``user:`` keys shared); the emitted event is the stored
    one.
    """

    @abc.abstractmethod
    def create_session(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, JsonValue] | None = None,
        session_id: str | None = None,
    ) -> reactivex.Observable[Session]:
        """Create a session (a fresh UUID id when ``session_id`` is None); emit its snapshot.

        Fails with :class:`~rxllm.ConfigurationError` when the id is already taken.
        """

    @abc.abstractmethod
    def get_session(self, app_name: str, user_id: str, session_id: str) -> reactivex.Observable[Session]:
        """Emit the session's snapshot, or complete empty when there is none (like a ``Maybe``)."""

    @abc.abstractmethod
    def list_sessions(self, app_name: str, user_id: str) -> reactivex.Observable[list[Session]]:
        """Emit the user's sessions of the app, as snapshots without their events (as ADK lists them)."""

    @abc.abstractmethod
    def delete_session(self, app_name: str, user_id: str, session_id: str) -> reactivex.Observable[None]:
        """Delete the session; complete without items (like a ``Completable``). Deleting a missing one is no error."""

    @abc.abstractmethod
    def append_event(self, session: Session, event: Event) -> reactivex.Observable[Event]:
        """Store ``event`` in the session ``session`` names; emit the stored event.

        A partial event is emitted back unchanged and not stored. Fails with
        :class:`~rxllm.ConfigurationError` when the session does not exist.
        """


@dataclass
class _Stored:
    id: str
    app_name: str
    user_id: str
    state: dict[str, JsonValue] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    last_update_time: float = 0.0


def _split_delta(
    delta: Mapping[str, JsonValue],
) -> tuple[dict[str, JsonValue], dict[str, JsonValue], dict[str, JsonValue]]:
    app: dict[str, JsonValue] = {}
    user: dict[str, JsonValue] = {}
    own: dict[str, JsonValue] = {}
    for key, value in delta.items():
        if key.startswith(TEMP_PREFIX):
            continue
        if key.startswith(APP_PREFIX):
            app[key] = copy.deepcopy(value)
        elif key.startswith(USER_PREFIX):
            user[key] = copy.deepcopy(value)
        else:
            own[key] = copy.deepcopy(value)
    return app, user, own


class InMemorySessionService(BaseSessionService):
    """A thread-safe session service in process memory (tests, demos, one-process apps).

    Each method does its work when subscribed, on the subscribing thread, under one lock, and
    emits synchronously. Snapshots are copies (see :class:`Session`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str, str], _Stored] = {}
        self._app_state: dict[str, dict[str, JsonValue]] = {}
        self._user_state: dict[tuple[str, str], dict[str, JsonValue]] = {}

    def create_session(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, JsonValue] | None = None,
        session_id: str | None = None,
    ) -> AwaitableObservable[Session]:
        """Create a session; see :meth:`BaseSessionService.create_session`."""
        initial = dict(state or {})

        def create() -> Session:
            sid = session_id if session_id is not None else str(uuid.uuid4())
            key = (app_name, user_id, sid)
            with self._lock:
                if key in self._sessions:
                    raise ConfigurationError(
                        f"session {sid!r} already exists for app {app_name!r} and user {user_id!r}"
                    )
                stored = _Stored(id=sid, app_name=app_name, user_id=user_id, last_update_time=time.time())
                self._apply(stored, initial)
                self._sessions[key] = stored
                return self._snapshot(stored, with_events=True)

        return awaitable(call_now(create))

    def get_session(self, app_name: str, user_id: str, session_id: str) -> MaybeObservable[Session]:
        """Emit a snapshot, or nothing; see :meth:`BaseSessionService.get_session`."""

        def subscribe_factory(_: object) -> reactivex.Observable[Session]:
            with self._lock:
                stored = self._sessions.get((app_name, user_id, session_id))
                snapshot = self._snapshot(stored, with_events=True) if stored is not None else None
            return emit_now(snapshot) if snapshot is not None else nothing_now()

        return MaybeObservable(reactivex.defer(subscribe_factory))

    def list_sessions(self, app_name: str, user_id: str) -> AwaitableObservable[list[Session]]:
        """Emit the user's sessions without events; see :meth:`BaseSessionService.list_sessions`."""

        def listing() -> list[Session]:
            with self._lock:
                return [
                    self._snapshot(stored, with_events=False)
                    for (app, user, _), stored in self._sessions.items()
                    if app == app_name and user == user_id
                ]

        return awaitable(call_now(listing))

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> MaybeObservable[None]:
        """Delete; see :meth:`BaseSessionService.delete_session`."""

        def factory(_: object) -> reactivex.Observable[None]:
            with self._lock:
                self._sessions.pop((app_name, user_id, session_id), None)
            return nothing_now()

        return MaybeObservable(reactivex.defer(factory))

    def append_event(self, session: Session, event: Event) -> AwaitableObservable[Event]:
        """Store a non-partial event; see :meth:`BaseSessionService.append_event`."""
        if event.partial:
            return awaitable(emit_now(event))

        def append() -> Event:
            key = (session.app_name, session.user_id, session.id)
            delta = event.actions.state_delta
            stored_event = event
            if any(k.startswith(TEMP_PREFIX) for k in delta):
                kept = {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}
                stored_event = event.model_copy(
                    update={"actions": event.actions.model_copy(update={"state_delta": kept})}
                )
            with self._lock:
                stored = self._sessions.get(key)
                if stored is None:
                    raise ConfigurationError(
                        f"cannot append to session {session.id!r} (app {session.app_name!r}, user "
                        f"{session.user_id!r}): no such session"
                    )
                self._apply(stored, delta)
                stored.events.append(stored_event)
                stored.last_update_time = stored_event.timestamp
            return stored_event

        return awaitable(call_now(append))

    def _apply(self, stored: _Stored, delta: Mapping[str, JsonValue]) -> None:
        app, user, own = _split_delta(delta)
        if app:
            self._app_state.setdefault(stored.app_name, {}).update(app)
        if user:
            self._user_state.setdefault((stored.app_name, stored.user_id), {}).update(user)
        stored.state.update(own)

    def _snapshot(self, stored: _Stored, *, with_events: bool) -> Session:
        merged: dict[str, JsonValue] = {
            **stored.state,
            **self._app_state.get(stored.app_name, {}),
            **self._user_state.get((stored.app_name, stored.user_id), {}),
        }
        return Session.model_construct(
            id=stored.id,
            app_name=stored.app_name,
            user_id=stored.user_id,
            state=copy.deepcopy(merged),
            events=tuple(stored.events) if with_events else (),
            last_update_time=stored.last_update_time,
        )
