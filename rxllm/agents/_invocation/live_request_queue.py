"""``LiveRequestQueue``: what the caller sends into a live (BIDI) run, as ADK Java's ``LiveRequestQueue``.

The caller puts turns (:meth:`LiveRequestQueue.content`), real-time media
(:meth:`LiveRequestQueue.realtime`) and the end of the session (:meth:`LiveRequestQueue.close`)
on the queue; the live flow reads it (:meth:`LiveRequestQueue.get`) and forwards each request
over the model's connection (``send_content``, ``send_realtime``, ``close``).

ADK Java backs the queue with a unicast sink buffering until its one subscriber arrives; this
queue does the same, bounded: requests put while no reader is subscribed wait (at most
``max_buffered``; one more raises :class:`~rxllm.BufferOverflowError`), and are delivered in order
to the next reader. One reader at a time; after a reader disposes another may subscribe (an
agent the live run transferred to reads the rest of the queue).
"""

from __future__ import annotations

import collections
import threading

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable

from ..._core.errors import BufferOverflowError, ConfigurationError
from ..._core.types import Blob, Content, _Model

__all__ = ["LiveRequest", "LiveRequestQueue"]

DEFAULT_MAX_BUFFERED = 1024
"""Requests that may wait for a reader: 20 s of 20 ms audio frames."""


class LiveRequest(_Model):
    """One request of a live run (ADK Java's ``LiveRequest``): exactly one of ``content`` (a turn,
    sent with ``send_content``), ``blob`` (real-time media, ``send_realtime``) or ``close=True``
    (end the session); anything else fails validation (pydantic's ``ValidationError``)."""

    content: Content | None = None
    blob: Blob | None = None
    close: bool = False

    def model_post_init(self, _: object) -> None:
        given = (self.content is not None) + (self.blob is not None) + bool(self.close)
        if given != 1:
            raise ConfigurationError("a LiveRequest holds exactly one of content, blob or close=True")


class LiveRequestQueue:
    """The caller's side of a live run: ``content``, ``realtime``, ``send``, ``close``; ``get()`` reads.

    Thread-safe: any thread may put requests. Each request is delivered on the thread that put it
    (or, when it waited for a reader, on the thread that subscribed), in the order put. After
    :meth:`close` the reader gets the close request, then completion; further puts raise
    :class:`~rxllm.ConfigurationError`.

    >>> from rxllm import Content, Part
    >>> queue = LiveRequestQueue()
    >>> queue.content(Content(role="user", parts=(Part.from_text("Hi"),)))
    >>> queue.close()
    >>> [(r.content is not None, r.close) for r in queue.get().pipe(__import__("reactivex").operators.to_list()).run()]
    [(True, False), (False, True)]
    """

    def __init__(self, *, max_buffered: int = DEFAULT_MAX_BUFFERED) -> None:
        if max_buffered < 1:
            raise ConfigurationError(f"max_buffered must be at least 1, got {max_buffered}")
        self._max_buffered = max_buffered
        self._lock = threading.Lock()
        self._buffer: collections.deque[LiveRequest] = collections.deque()
        self._observer: rx_abc.ObserverBase[LiveRequest] | None = None
        self._draining = False
        self._closed = False  # close() was called: no more puts
        self._completed = False  # the close request was delivered

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def content(self, content: Content) -> None:
        """Send one turn (the user's words), as ADK Java's ``content``."""
        self.send(LiveRequest(content=content))

    def realtime(self, blob: Blob) -> None:
        """Send a piece of real-time media (an audio chunk, a video frame), as ADK Java's ``realtime``."""
        self.send(LiveRequest(blob=blob))

    def close(self) -> None:
        """End the live session: the flow closes the connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._buffer.append(LiveRequest(close=True))
        self._drain()

    def send(self, request: LiveRequest) -> None:
        """Put one request.

        Raises:
            ConfigurationError: the queue is closed, or ``request`` is not a :class:`LiveRequest`.
            BufferOverflowError: no reader is subscribed and ``max_buffered`` requests wait already.
        """
        if not isinstance(request, LiveRequest):
            raise ConfigurationError(f"send takes a LiveRequest, got {type(request).__name__}")
        if request.close:
            self.close()
            return
        with self._lock:
            if self._closed:
                raise ConfigurationError("the LiveRequestQueue is closed")
            if len(self._buffer) >= self._max_buffered:
                raise BufferOverflowError(
                    f"{len(self._buffer)} live requests wait for a reader (max_buffered={self._max_buffered})"
                )
            self._buffer.append(request)
        self._drain()

    def get(self) -> reactivex.Observable[LiveRequest]:
        """The requests, as ADK Java's ``get()``: the waiting ones first, then each as it is put.

        Completes after delivering the close request. One subscriber at a time: a second
        concurrent one fails with :class:`~rxllm.ConfigurationError`.
        """

        def subscribe(
            observer: rx_abc.ObserverBase[LiveRequest], _: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            with self._lock:
                busy = self._observer is not None
                done = self._completed
                if not busy and not done:
                    self._observer = observer
            if busy:
                observer.on_error(ConfigurationError("a LiveRequestQueue has one reader at a time"))
                return Disposable()
            if done:
                observer.on_completed()
                return Disposable()

            def dispose() -> None:
                with self._lock:
                    if self._observer is observer:
                        self._observer = None

            self._drain()
            return Disposable(dispose)

        return reactivex.create(subscribe)

    def _drain(self) -> None:
        """Deliver waiting requests to the reader; one thread drains at a time (the others return)."""
        with self._lock:
            if self._draining:
                return
            self._draining = True
        while True:
            with self._lock:
                observer = self._observer
                if observer is None or not self._buffer:
                    self._draining = False
                    return
                request = self._buffer.popleft()
                if request.close:
                    self._completed = True
                    self._observer = None
            observer.on_next(request)
            if request.close:
                observer.on_completed()
