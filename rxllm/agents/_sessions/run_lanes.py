"""One writer per session: runs on one session start one after the other, whichever ``Runner`` starts them.

Every :class:`~rxllm.agents.BaseSessionService` serializes the runs on each of its sessions through
:meth:`~rxllm.agents.BaseSessionService.serialize_run`; by default through the lanes of
:func:`session_lanes`: one registry per service object (so every ``Runner`` sharing a service
shares its lanes), one FIFO lane per ``(app_name, user_id, session_id)``. A run starts only when
every run queued before it on its session has terminated or was disposed; a disposed run that had
not started yet leaves the queue. This holds within one process; a store shared by several
processes overrides ``serialize_run`` to add its own cross-process lock around this one.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Protocol, TypeVar

import reactivex
from reactivex import abc as rx_abc

from ..._rx.direct import Direct, DisposeAction, Slot

__all__ = ["SessionKey", "SessionLanes", "Ticket", "Turn", "session_lanes"]

logger = logging.getLogger("rxllm.agents")

T = TypeVar("T")

SessionKey = tuple[str, str, str]
"""``(app_name, user_id, session_id)``."""


class Turn(Protocol):
    """A run's place in its session's lane: ``start`` is called when its turn comes (it, or whoever it
    hands the turn to, then calls :meth:`SessionLanes.leave`). Queued and withdrawn by identity."""

    def start(self) -> None: ...


class Ticket:
    """A :class:`Turn` that calls ``start``."""

    __slots__ = ("start",)

    def __init__(self, start: Callable[[], None]) -> None:
        self.start = start


class SessionLanes:
    """One FIFO lane per session: a run starts only when every run queued before it on the lane
    has terminated or was disposed. Starting is trampolined per thread, so a long queue of runs
    that complete synchronously does not grow the stack."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[SessionKey, deque[Turn]] = {}  # a key is present while its lane is busy
        self._local = threading.local()

    def enter(self, key: SessionKey, ticket: Turn) -> None:
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is not None:
                waiting.append(ticket)
                return
            self._waiting[key] = deque()
        self._start(ticket)

    def withdraw(self, key: SessionKey, ticket: Turn) -> bool:
        """Remove a ticket that has not been started; False when it was already taken off the queue."""
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is not None and ticket in waiting:
                waiting.remove(ticket)
                return True
            return False

    def leave(self, key: SessionKey) -> None:
        with self._lock:
            waiting = self._waiting[key]
            if not waiting:
                del self._waiting[key]
                return
            ticket = waiting.popleft()
        self._start(ticket)

    def busy(self, key: SessionKey) -> bool:
        with self._lock:
            return key in self._waiting

    def _start(self, ticket: Turn) -> None:
        pending: deque[Turn] | None = getattr(self._local, "pending", None)
        if pending is not None:
            pending.append(ticket)
            return
        pending = self._local.pending = deque([ticket])
        try:
            while pending:
                current = pending.popleft()
                try:
                    current.start()
                except Exception:  # start() forwards errors itself; this guards the lane
                    logger.exception("a queued run failed to start")
        finally:
            self._local.pending = None

    def serialized(self, key: SessionKey, source: reactivex.Observable[T]) -> reactivex.Observable[T]:
        """``source``, subscribed only when it is this subscription's turn on the lane ``key``."""

        def subscribe(
            observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            lock = threading.Lock()
            inner = Slot()  # lock-free: set once, disposed at most with everything below
            flags = {"started": False, "disposed": False, "released": False}

            def release() -> None:
                with lock:
                    if flags["released"]:
                        return
                    flags["released"] = True
                self.leave(key)

            def on_error(error: Exception) -> None:
                try:
                    observer.on_error(error)
                finally:
                    release()

            def on_completed() -> None:
                try:
                    observer.on_completed()
                finally:
                    release()

            def start() -> None:
                with lock:
                    if flags["disposed"]:
                        disposed = True
                    else:
                        disposed = False
                        flags["started"] = True
                if disposed:  # taken off the queue while being disposed: pass the turn on
                    release()
                    return
                inner.set(source.subscribe(observer.on_next, on_error, on_completed, scheduler=scheduler))

            ticket = Ticket(start)
            self.enter(key, ticket)

            def dispose() -> None:
                with lock:
                    flags["disposed"] = True
                    started = flags["started"]
                inner.dispose()
                if started:
                    release()
                else:
                    self.withdraw(key, ticket)  # if already taken off the queue, start() will release

            return DisposeAction(dispose)

        return Direct(subscribe)


_registry_lock = threading.Lock()
_registry: weakref.WeakKeyDictionary[object, SessionLanes] = weakref.WeakKeyDictionary()
_by_id: dict[int, SessionLanes] = {}  # services that cannot be weakly referenced or hashed


def session_lanes(service: object) -> SessionLanes:
    """The lanes of ``service``: the same object for every caller, for as long as the service lives."""
    with _registry_lock:
        try:
            lanes = _registry.get(service)
            if lanes is None:
                lanes = _registry[service] = SessionLanes()
            return lanes
        except TypeError:  # unhashable, or no __weakref__ slot: keyed by identity, kept for the process
            key = id(service)
            lanes = _by_id.get(key)
            if lanes is None:
                lanes = _by_id[key] = SessionLanes()
            return lanes
