"""Sessions: ``Session``, ``BaseSessionService`` and ``InMemorySessionService``.

A session service stores the events of a conversation. Its methods return cold Observables of
one item (or none), as ADK Java's ``Single`` / ``Maybe`` / ``Completable``. ``append_event`` keeps
the first check of ADK Java's ``BaseSessionService.appendEvent``: a partial event is returned
unchanged and never stored.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import reactivex
from pydantic import Field, JsonValue

from ..._core import prevalidated
from ..._core.errors import ConfigurationError
from ..._core.json_codec import without_lone_surrogates
from ..._core.redact import redact_secrets
from ..._core.types import _Model
from ..._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from ..._rx.direct import call_now, defer_now, emit_now, nothing_now
from .event import Event
from .run_lanes import session_lanes
from .state import apply_state_delta, strip_temp_keys

__all__ = ["BaseSessionService", "GetSessionConfig", "InMemorySessionService", "Session"]


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


class GetSessionConfig(_Model):
    """Which events :meth:`BaseSessionService.get_session` returns (ADK's ``GetSessionConfig``).

    Attributes:
        num_recent_events: keep only the last N events (0 keeps none); None keeps all.
        after_timestamp: then drop the events whose ``timestamp`` is before this (seconds since
            the epoch; an event exactly at it is kept); None drops none.

    The session's state is always the whole state, whatever events are returned.
    """

    num_recent_events: int | None = Field(default=None, ge=0)
    after_timestamp: float | None = None


def select_events(events: Sequence[Event], config: GetSessionConfig | None) -> tuple[Event, ...]:
    """The events ``config`` asks for, in stored order: the last N first, then the timestamp filter."""
    if config is None:
        return tuple(events)
    chosen = list(events)
    if config.num_recent_events is not None:
        chosen = chosen[max(0, len(chosen) - config.num_recent_events) :]
    if config.after_timestamp is not None:
        threshold = config.after_timestamp
        chosen = [event for event in chosen if event.timestamp >= threshold]
    return tuple(chosen)


def event_to_store(event: Event) -> Event:
    """The event as a session stores it: its ``temp:`` state keys removed (they are never persisted),
    every lone surrogate in its text replaced by U+FFFD (UTF-8 cannot carry one; stored, it would
    make every later request of the session fail: see ``without_lone_surrogates``)."""
    event = without_lone_surrogates(event)
    fields = event.__dict__  # (read once: each attribute read of a pydantic model is a slow lookup)
    message = fields["error_message"]
    if message:  # an in-band error text may quote a key (``rxllm._core.redact``)
        redacted = redact_secrets(message)
        if redacted != message:
            event = event.model_copy(update={"error_message": redacted})
    actions = fields["actions"]  # (a copy above keeps the very actions)
    kept = strip_temp_keys(actions.state_delta)
    if kept is None:
        return event
    return event.model_copy(update={"actions": actions.model_copy(update={"state_delta": kept})})


def merged_state(
    session: Mapping[str, JsonValue], app: Mapping[str, JsonValue], user: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    """A snapshot's ``state``: the session's keys plus the app's ``app:`` and the user's ``user:`` keys (a copy)."""
    if not (session or app or user):  # the usual new session: nothing to copy (deepcopy of {} is a new {})
        return {}
    return copy.deepcopy({**session, **app, **user})


def missing_session_error(session: Session) -> ConfigurationError:
    """The error ``append_event`` fails with when the session is not (or no longer) stored."""
    return ConfigurationError(
        f"cannot append to session {session.id!r} (app {session.app_name!r}, user {session.user_id!r}): no such session"
    )


def taken_id_error(app_name: str, user_id: str, session_id: str) -> ConfigurationError:
    """The error ``create_session`` fails with when the id is taken."""
    return ConfigurationError(f"session {session_id!r} already exists for app {app_name!r} and user {user_id!r}")


class BaseSessionService(abc.ABC):
    """Where sessions live. Every method returns a cold Observable: subscribing does the work.

    Implementations must keep ``append_event``'s contract: a partial event is emitted back
    unchanged and not stored; a stored event's ``actions.state_delta`` is applied to the state
    through :func:`~rxllm.agents._sessions.state.apply_state_delta` (``temp:`` keys dropped, ``app:`` /
    ``user:`` keys shared); the emitted event is the stored one. The event and its state delta are
    stored together or not at all.

    **Concurrent and stale appends (the merge rule).** A :class:`Session` is a snapshot: appending
    through an older snapshot than the stored session (another process or run appended meanwhile)
    is allowed and loses nothing. Events are only ever appended, in commit order, never replaced;
    a state delta is merged key by key into the state *as stored at commit time*, never into the
    snapshot's copy. Two appends that set the same key leave the value of the one committed last;
    both events, each with its own delta, stay in the history. Nothing else is overwritten.
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
    def get_session(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> reactivex.Observable[Session]:
        """Emit the session's snapshot, or complete empty when there is none (like a ``Maybe``).

        ``config`` narrows the events returned (see :class:`GetSessionConfig`); the state is whole.
        """

    @abc.abstractmethod
    def list_sessions(self, app_name: str, user_id: str) -> reactivex.Observable[list[Session]]:
        """Emit the user's sessions of the app, as snapshots without their events (as ADK lists them)."""

    @abc.abstractmethod
    def delete_session(self, app_name: str, user_id: str, session_id: str) -> reactivex.Observable[None]:
        """Delete the session; complete without items (like a ``Completable``). Deleting a missing one is no error."""

    def serialize_run(
        self, app_name: str, user_id: str, session_id: str, run: reactivex.Observable[Event]
    ) -> AwaitableObservable[Event]:
        """``run``, subscribed only when every earlier run on this session has ended: one writer per session.

        :class:`~rxllm.agents.Runner` passes every run through here, so runs on one session never
        interleave, whichever runner (sharing this service) starts them. The default queues the
        runs in FIFO order in this process (see ``rxllm.agents._sessions.run_lanes``); disposing a queued
        run takes it off the queue. A store shared by several processes overrides this to hold a
        cross-process lock as well (calling ``super().serialize_run`` inside it).
        """
        return awaitable(session_lanes(self).serialized((app_name, user_id, session_id), run))

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
                    raise taken_id_error(app_name, user_id, sid)
                stored = _Stored(id=sid, app_name=app_name, user_id=user_id, last_update_time=time.time())
                self._apply(stored, initial)
                self._sessions[key] = stored
                return self._snapshot(stored, with_events=True)

        return awaitable(call_now(create))

    def get_session(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> MaybeObservable[Session]:
        """Emit a snapshot, or nothing; see :meth:`BaseSessionService.get_session`."""

        def subscribe_factory() -> reactivex.Observable[Session]:
            snapshot = self._get_now(app_name, user_id, session_id, config)
            return emit_now(snapshot) if snapshot is not None else nothing_now()

        return MaybeObservable(defer_now(subscribe_factory))

    def _get_now(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> Session | None:
        """What :meth:`get_session` emits (None: it completes empty), looked up now."""
        with self._lock:
            stored = self._sessions.get((app_name, user_id, session_id))
            return self._snapshot(stored, with_events=True, config=config) if stored is not None else None

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

        def factory() -> reactivex.Observable[None]:
            with self._lock:
                self._sessions.pop((app_name, user_id, session_id), None)
            return nothing_now()

        return MaybeObservable(defer_now(factory))

    def append_event(self, session: Session, event: Event) -> AwaitableObservable[Event]:
        """Store a non-partial event; see :meth:`BaseSessionService.append_event`."""
        if event.partial:
            return awaitable(emit_now(event))
        return awaitable(call_now(partial(self._append_now, session, event)))

    def _append_now(self, session: Session, event: Event) -> Event:
        """What :meth:`append_event` emits, stored now (raises what it fails with)."""
        fields = event.__dict__  # (its fields read off __dict__: each attribute read is a slow lookup)
        if fields["partial"]:
            return event
        key = session_key(session)
        stored_event = event_to_store(event)
        if stored_event is not event:
            fields = stored_event.__dict__
        with self._lock:
            stored = self._sessions.get(key)
            if stored is None:
                raise missing_session_error(session)
            delta = fields["actions"].state_delta
            if delta:  # (an empty delta changes no scope)
                self._apply(stored, delta)
            stored.events.append(stored_event)
            stored.last_update_time = fields["timestamp"]
        return stored_event

    def _apply(self, stored: _Stored, delta: Mapping[str, JsonValue]) -> None:
        apply_state_delta(
            delta,
            app=self._app_state.setdefault(stored.app_name, {}),
            user=self._user_state.setdefault((stored.app_name, stored.user_id), {}),
            session=stored.state,
        )

    def _snapshot(self, stored: _Stored, *, with_events: bool, config: GetSessionConfig | None = None) -> Session:
        return _session_snapshot(
            {
                "id": stored.id,
                "app_name": stored.app_name,
                "user_id": stored.user_id,
                "state": merged_state(
                    stored.state,
                    self._app_state.get(stored.app_name, _EMPTY),
                    self._user_state.get((stored.app_name, stored.user_id), _EMPTY),
                ),
                "events": select_events(stored.events, config) if with_events else (),
                "last_update_time": stored.last_update_time,
            }
        )


_EMPTY: Mapping[str, JsonValue] = {}


def session_key(session: Session) -> tuple[str, str, str]:
    """``(session.app_name, session.user_id, session.id)``, read off its ``__dict__`` (one slow lookup, not three)."""
    fields = session.__dict__
    try:
        return (fields["app_name"], fields["user_id"], fields["id"])
    except KeyError:  # (a Session built without them, by model_construct: the attribute error of reading them)
        return (session.app_name, session.user_id, session.id)


_SESSION_FIELDS = frozenset(Session.model_fields)


def _session_snapshot(values: dict[str, object]) -> Session:
    """``Session.model_construct(**values)`` for ``values`` naming every field (checked values, no
    validation), without model_construct's per-field default handling (a snapshot per model call)."""
    return prevalidated.instance(Session, values, set(_SESSION_FIELDS))


AppendNow = Callable[[Session, Event], Event]
GetNow = Callable[[str, str, str], "Session | None"]


def append_now(service: BaseSessionService) -> AppendNow | None:
    """``service.append_event`` as a plain call (the stored event, or the exception it fails with)
    when it is :class:`InMemorySessionService`'s own, which does its work during subscribe and emits
    at once: the runtimes then store without an Observable per event. None for any other service
    (a subclass that overrides ``append_event`` too): they subscribe to it."""
    if type(service).append_event is InMemorySessionService.append_event:
        return service._append_now  # type: ignore[attr-defined, no-any-return]
    return None


def get_now(service: BaseSessionService) -> GetNow | None:
    """``service.get_session`` as a plain call (the snapshot, None for none) when it is
    :class:`InMemorySessionService`'s own (see :func:`append_now`); None for any other service."""
    if type(service).get_session is InMemorySessionService.get_session:
        return service._get_now  # type: ignore[attr-defined, no-any-return]
    return None
