"""A scripted ``BaseLlm`` for tests: it answers each call with the next scripted turn, on a clock.

Like a real model, it emits *asynchronously*: subscribing only schedules the turn on the
model's scheduler (a fresh thread per call by default, or the test's ``TestScheduler``), so
``share()``, ``switch_map`` and ``merge`` see what they would see against a server. Items may
carry a time (:class:`At`): under a ``TestScheduler`` a test can then cancel mid-stream, time the
first partial or fire a timeout, and :attr:`ScriptedLlm.calls` records when each call was
subscribed, ended or disposed, in the scheduler's time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SerialDisposable
from reactivex.scheduler import NewThreadScheduler, VirtualTimeScheduler

from .._core.errors import ConfigurationError, LimitExceededError, TransportError
from .._core.types import Blob, Content, LlmRequest, LlmResponse
from .._models.aggregation import StreamAggregator
from .._models.base_llm import BaseLlm, BaseLlmConnection
from .._models.chunk import Chunk
from .._models.prompt import Prompt, as_request
from .._rx.aio import AwaitableObservable

__all__ = ["At", "LiveSend", "ScriptedCall", "ScriptedConnection", "ScriptedLlm", "at_times", "scripted_turn"]


@dataclass(frozen=True)
class At:
    """A scripted item with its time: ``seconds`` after the call was subscribed.

    An item without a time is emitted at the time of the item before it (the first at 0).

    Attributes:
        seconds: the offset from subscription, finite and ``>= 0``.
        item: the response to emit, or the exception to emit as ``on_error``.
    """

    seconds: float
    item: LlmResponse | Exception

    def __post_init__(self) -> None:
        seconds = self.seconds
        if not (isinstance(seconds, int | float) and seconds >= 0 and seconds != float("inf")):
            raise ConfigurationError(f"At.seconds must be a finite number >= 0, got {seconds!r}")


ScriptItem = LlmResponse | Exception | At
"""One item of a scripted turn: a response, an exception (``on_error`` where it stands), or either at a time."""


def at_times(items: Sequence[LlmResponse | Exception], times: Sequence[float]) -> list[At]:
    """Pair a turn's items with their times (seconds after subscription), one time per item.

    >>> from rxllm import Chunk
    >>> [(a.seconds, a.item.partial) for a in at_times(scripted_turn(Chunk(text_delta="Hi")), [0.1, 0.35])]
    [(0.1, True), (0.35, None)]
    """
    if len(items) != len(times):
        raise ConfigurationError(f"at_times got {len(items)} item(s) but {len(times)} time(s)")
    return [At(t, item) for t, item in zip(times, items, strict=True)]


def scripted_turn(*chunks: Chunk) -> list[LlmResponse]:
    """The contract-correct responses for a stream of chunks: its partials, then its final.

    Runs the real :class:`~rxllm.StreamAggregator`, so the sequence is what a streaming
    provider would emit for those chunks.

    >>> from rxllm import Chunk, ToolCallFragment
    >>> turn = scripted_turn(Chunk(text_delta="Checking"),
    ...                      Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "get_order", '{"order_id":"A17"}'),)))
    >>> [r.partial for r in turn], turn[-1].function_calls()[0].args
    ([True, None], {'order_id': 'A17'})
    """
    aggregator = StreamAggregator()
    out: list[LlmResponse] = []
    for chunk in chunks:
        out.extend(aggregator.accept(chunk))
    out.append(aggregator.finish())
    return out


@dataclass
class ScriptedCall:
    """One call to a :class:`ScriptedLlm`, as it happened. Times are the scheduler's, in seconds
    (``TestScheduler.clock`` under virtual time, ``time.monotonic()`` otherwise).

    Attributes:
        request: the request the call was made with.
        stream: the ``stream`` flag.
        subscribed_at: when the call was subscribed (the model call "started").
        ended_at: when it completed or failed, or ``None``.
        disposed_at: when the subscriber disposed it before it ended (a cancellation), or ``None``.
        emitted: how many items it emitted.
    """

    request: LlmRequest
    stream: bool
    subscribed_at: float
    ended_at: float | None = None
    disposed_at: float | None = None
    emitted: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def cancelled(self) -> bool:
        """Whether the subscriber disposed the call before it ended."""
        return self.disposed_at is not None


class ScriptedLlm(BaseLlm):
    """A model that answers call *n* with scripted turn *n*, emitting on a scheduler.

    Each turn is a sequence of responses and exceptions (emitted as ``on_error`` where they
    stand), each optionally :class:`At` a time after subscription. With ``stream=True`` the
    turn is emitted as scripted; with ``stream=False`` only its last response is, with
    ``partial`` unset, at the time of the turn's last item (or its first exception, at that
    exception's time). Completion follows the last item at the same instant.

    Emission is asynchronous, as with a real model: subscribing records the call and schedules
    the turn on ``scheduler``; nothing is emitted inside ``subscribe``. Without a scheduler each
    call emits on a fresh daemon thread (timed items in real time); pass the test's
    ``TestScheduler`` to run the turn in virtual time, or ``ImmediateScheduler()`` for the
    old synchronous emission (untimed turns only). Disposing stops the turn at once and records
    the instant in :attr:`calls`.

    Live sessions: ``live`` holds one script per :meth:`connect` (responses, exceptions, :class:`At`
    times from the subscription of ``receive()``), played on the same scheduler; see
    :class:`ScriptedConnection`.

    Attributes:
        requests: every call as ``(llm_request, stream)``, in subscription order.
        calls: every call as a :class:`ScriptedCall` (times, emitted count, cancellation).
        connections: every live session opened, in order.

    >>> from reactivex import operators as ops
    >>> from reactivex.testing import TestScheduler
    >>> from rxllm import Chunk, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, at_times, scripted_turn
    >>> llm = ScriptedLlm([scripted_turn(Chunk(text_delta="Hi"))])
    >>> [r.partial for r in llm.generate_content(LlmRequest(), stream=True).pipe(ops.to_list()).run()]
    [True, None]
    >>> clock = TestScheduler()
    >>> llm = ScriptedLlm([at_times(scripted_turn(Chunk(text_delta="Hi")), [0.1, 0.35])], scheduler=clock)
    >>> seen = []
    >>> subscription = llm.generate_content(LlmRequest(), stream=True).subscribe(seen.append)
    >>> seen  # nothing inside subscribe: the turn is scheduled
    []
    >>> clock.advance_to(0.2)
    >>> [(r.text(), r.partial) for r in seen]
    [('Hi', True)]
    >>> subscription.dispose()
    >>> llm.calls[0].disposed_at, llm.calls[0].emitted
    (0.2, 1)
    """

    def __init__(
        self,
        turns: Iterable[Sequence[ScriptItem]],
        *,
        model: str = "scripted",
        scheduler: rx_abc.SchedulerBase | None = None,
        live: Iterable[Sequence[ScriptItem]] = (),
    ) -> None:
        super().__init__(model=model)
        self._turns = [_timeline(turn) for turn in turns]
        self._live = [_timeline(script) for script in live]
        self.connections: list[ScriptedConnection] = []
        self._scheduler = scheduler
        self._lock = threading.Lock()
        self.requests: list[tuple[LlmRequest, bool]] = []
        self.calls: list[ScriptedCall] = []

    @property
    def scheduler(self) -> rx_abc.SchedulerBase | None:
        """The scheduler the turns are emitted on (``None``: a fresh thread per call)."""
        return self._scheduler

    def generate_content(self, llm_request: Prompt, stream: bool = False) -> AwaitableObservable[LlmResponse]:
        """Emit the next scripted turn (``llm_request`` may be a plain string, as on every model).

        Returns a cold Observable: subscribing takes the next turn and schedules its items on
        the model's scheduler; disposing stops the turn (nothing more is emitted) and records
        :attr:`ScriptedCall.disposed_at`. Running out of turns is a :class:`~rxllm.LimitExceededError`.
        """
        request = as_request(llm_request)

        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], _: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            scheduler = self._scheduler or NewThreadScheduler()
            with self._lock:
                number = len(self.requests)
                self.requests.append((request, stream))
                call = ScriptedCall(request, stream, subscribed_at=_now(scheduler))
                self.calls.append(call)
            if number >= len(self._turns):
                message = f"ScriptedLlm has only {len(self._turns)} scripted turn(s); this is call #{number + 1}"
                timeline: list[tuple[float, LlmResponse | Exception]] = [(0.0, LimitExceededError(message))]
            else:
                timeline = self._turns[number] if stream else _as_single(self._turns[number])
            return _play(timeline, observer, scheduler, call)

        return AwaitableObservable(reactivex.create(subscribe))


    def connect(self, llm_request: LlmRequest) -> ScriptedConnection:
        """Open the next scripted live session (see :class:`ScriptedConnection`).

        Raises:
            UnsupportedOperationError: (at once) the model was given no ``live`` scripts: it is a
                model without live sessions, as :meth:`BaseLlm.connect`.
            LimitExceededError: (at once) every live script was used.
        """
        if not self._live:
            return super().connect(llm_request)  # type: ignore[return-value]
        with self._lock:
            number = len(self.connections)
            if number >= len(self._live):
                raise LimitExceededError(
                    f"ScriptedLlm has only {len(self._live)} scripted live session(s); this is connect #{number + 1}"
                )
            connection = ScriptedConnection(as_request(llm_request), self._live[number], self._scheduler)
            self.connections.append(connection)
        return connection


@dataclass(frozen=True)
class LiveSend:
    """One send on a :class:`ScriptedConnection`: ``kind`` is ``"history"`` (``value`` the contents),
    ``"content"`` or ``"realtime"`` (a ``Blob``); ``at`` is the scheduler's time of the call."""

    kind: str
    value: tuple[Content, ...] | Content | Blob
    at: float


class ScriptedConnection(BaseLlmConnection):
    """A scripted live session for virtual-time tests of ``run_live`` pipelines.

    Subscribing ``receive()`` (once) plays the script on the model's scheduler, as
    ``generate_content`` plays a turn; after the script the session stays open, as a server
    waiting for input, until :meth:`close` (``receive()`` completes, or fails with the error). An
    exception in the script fails ``receive()`` where it stands. The sends record what was sent,
    in call order, with the scheduler's time (:attr:`sent`), and complete at once.

    Attributes:
        request: the request ``connect`` was called with.
        sent: every send, as :class:`LiveSend`.
        call: the timing of ``receive()`` (subscribed, ended, disposed, emitted), as a
            :class:`ScriptedCall`; None before it is subscribed.
        close_error: the error given to ``close(error)``, if any.
    """

    def __init__(
        self,
        request: LlmRequest,
        timeline: list[tuple[float, LlmResponse | Exception]],
        scheduler: rx_abc.SchedulerBase | None,
    ) -> None:
        self.request = request
        self._timeline = timeline
        self._scheduler = scheduler or NewThreadScheduler()
        self._lock = threading.Lock()
        self._observer: rx_abc.ObserverBase[LlmResponse] | None = None
        self._playing: rx_abc.DisposableBase | None = None
        self._closed = False
        self.sent: list[LiveSend] = []
        self.call: ScriptedCall | None = None
        self.close_error: BaseException | None = None

    @property
    def closed(self) -> bool:
        """Whether the session ended: :meth:`close`, or ``receive()`` disposed or failed."""
        return self._closed

    def _record(self, kind: str, value: tuple[Content, ...] | Content | Blob) -> reactivex.Observable[None]:
        with self._lock:
            if self._closed:
                return reactivex.throw(TransportError("the scripted live session is closed"))
            self.sent.append(LiveSend(kind, value, _now(self._scheduler)))
        return reactivex.empty()

    def send_history(self, history: Sequence[Content]) -> reactivex.Observable[None]:
        """Record the history; completes at once."""
        return self._record("history", tuple(history))

    def send_content(self, content: Content) -> reactivex.Observable[None]:
        """Record the turn; completes at once."""
        return self._record("content", content)

    def send_realtime(self, blob: Blob) -> reactivex.Observable[None]:
        """Record the media; completes at once."""
        return self._record("realtime", blob)

    def receive(self) -> reactivex.Observable[LlmResponse]:
        """The scripted responses; subscribable once (a second subscription fails with ``ConfigurationError``)."""

        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], _: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            with self._lock:
                if self.call is not None:
                    observer.on_error(ConfigurationError("receive() of a live session may be subscribed once"))
                    return Disposable()
                self.call = ScriptedCall(self.request, True, subscribed_at=_now(self._scheduler))
                self._observer = observer
                closed = self._closed
            if closed:
                self._terminate()
                return Disposable()
            self._playing = _play(self._timeline, _StayOpen(observer, self), self._scheduler, self.call)

            def dispose() -> None:
                with self._lock:
                    self._closed = True
                    self._observer = None
                if self._playing is not None:
                    self._playing.dispose()

            return Disposable(dispose)

        return AwaitableObservable(reactivex.create(subscribe))

    def close(self, error: BaseException | None = None) -> None:
        """End the session: the script stops; ``receive()`` completes (or fails with ``error``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.close_error = error
        if self._playing is not None:
            self._playing.dispose()
        self._terminate()

    def _terminate(self) -> None:
        with self._lock:
            observer, self._observer = self._observer, None
        if observer is None:
            return
        if self.close_error is not None:
            error = self.close_error
            observer.on_error(error if isinstance(error, Exception) else TransportError(str(error)))
        else:
            observer.on_completed()

    def _failed(self) -> None:
        with self._lock:
            self._closed = True
            self._observer = None


class _StayOpen(rx_abc.ObserverBase[LlmResponse]):
    """The observer a live script plays into: its end leaves the session open; an error ends it."""

    def __init__(self, observer: rx_abc.ObserverBase[LlmResponse], connection: ScriptedConnection) -> None:
        self._observer = observer
        self._connection = connection

    def on_next(self, value: LlmResponse) -> None:
        self._observer.on_next(value)

    def on_error(self, error: Exception) -> None:
        self._connection._failed()
        self._observer.on_error(error)

    def on_completed(self) -> None:
        pass


def _play(
    timeline: list[tuple[float, LlmResponse | Exception]],
    observer: rx_abc.ObserverBase[LlmResponse],
    scheduler: rx_abc.SchedulerBase,
    call: ScriptedCall,
) -> rx_abc.DisposableBase:
    """Schedule ``timeline`` on ``scheduler``; items due at the same instant go out in one action."""
    playback = _Playback(timeline, observer, scheduler, call)
    first = timeline[0][0] if timeline else 0.0
    playback.pending.disposable = playback.schedule_at(first, 0.0) if first > 0 else scheduler.schedule(playback.run)
    return Disposable(playback.dispose)


class _Playback:
    """One call's timeline being played (an object, not closures that call each other: those would be
    a reference cycle, freed only by the garbage collector; once it ends, nothing refers back to it)."""

    def __init__(
        self,
        timeline: list[tuple[float, LlmResponse | Exception]],
        observer: rx_abc.ObserverBase[LlmResponse],
        scheduler: rx_abc.SchedulerBase,
        call: ScriptedCall,
    ) -> None:
        self.timeline = timeline
        self.observer = observer
        self.scheduler = scheduler
        self.call = call
        self.pending = SerialDisposable()
        self.index = 0
        self.done = False

    def finish(self) -> bool:
        with self.call._lock:
            if self.done:
                return False
            self.done = True
            self.call.ended_at = _now(self.scheduler)
            return True

    def run(self, _scheduler: rx_abc.SchedulerBase, _state: Any = None) -> None:
        timeline, call, observer = self.timeline, self.call, self.observer
        index = self.index
        due = timeline[index][0] if index < len(timeline) else (timeline[-1][0] if timeline else 0.0)
        while True:
            with call._lock:
                if self.done:
                    return
            if index >= len(timeline):
                if self.finish():
                    self._let_go()
                    observer.on_completed()
                return
            at, item = timeline[index]
            if at > due:
                self.index = index
                with call._lock:
                    if not self.done:
                        self.pending.disposable = self.schedule_at(at, due)
                return
            index += 1
            if isinstance(item, Exception):
                if self.finish():
                    self._let_go()
                    observer.on_error(item)
                return
            call.emitted += 1
            observer.on_next(item)

    def dispose(self) -> None:
        with self.call._lock:
            if not self.done:
                self.done = True
                self.call.disposed_at = _now(self.scheduler)
        self.pending.dispose()

    def _let_go(self) -> None:
        """Ended: the scheduled action that ran (it holds this playback) is not held any more."""
        self.pending = SerialDisposable()

    def schedule_at(self, offset: float, current: float) -> rx_abc.DisposableBase:
        scheduler = self.scheduler
        if isinstance(scheduler, VirtualTimeScheduler):  # absolute: no drift from summed offsets
            return scheduler.schedule_absolute(self.call.subscribed_at + offset, self.run)
        return scheduler.schedule_relative(offset - current, self.run)


def _now(scheduler: rx_abc.SchedulerBase) -> float:
    if isinstance(scheduler, VirtualTimeScheduler):
        return round(float(scheduler.clock), 9)
    return time.monotonic()


def _timeline(turn: Sequence[ScriptItem]) -> list[tuple[float, LlmResponse | Exception]]:
    out: list[tuple[float, LlmResponse | Exception]] = []
    now = 0.0
    for item in turn:
        if isinstance(item, At):
            if item.seconds < now:
                raise ConfigurationError(
                    f"scripted items must be in time order: an item at {item.seconds}s follows one at {now}s"
                )
            now, item = float(item.seconds), item.item
        out.append((now, item))
    return out


def _as_single(turn: Sequence[tuple[float, LlmResponse | Exception]]) -> list[tuple[float, LlmResponse | Exception]]:
    errors = [(at, item) for at, item in turn if isinstance(item, Exception)]
    if errors:
        return [errors[0]]
    if not turn:
        return []
    at, last = turn[-1]
    assert isinstance(last, LlmResponse)
    return [(at, last.model_copy(update={"partial": None}))]
