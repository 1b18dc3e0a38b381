"""Review of the performance round's core fast paths: what each must keep under races and odd input.

* ``rxllm._rx.direct``'s lock-free ``Slot``, serial slot, ``DisposeAction`` and ``then_now`` /
  ``collect_then``'s first-then: a dispose landing at any point of a ``set`` (or of a completion)
  must still dispose everything set, and an action runs once. The racy orders are forced by
  running the "other thread's" dispose at each read of the flag the code checks.
* ``rxllm._rx.buffer.StreamBuffer`` (first-item slot, lazy condition): the same items in the same
  order as a plain queue; an emitter waiting for room is woken by a poll and by a close.
* ``rxllm._core.prevalidated`` and the aggregator's partials built without validation: equal to a
  validated instance in every pydantic operation (copy with update, fields set, extra, private,
  pickle, deepcopy, hash, JSON); ``buildable`` refuses classes whose validation does work.
* ``rxllm._models.sse``'s run-of-events path against the line-by-line path (bytes fed one by one
  never take it) on mixed line ends, comments, ``id`` / ``retry``, non-ASCII and split reads.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import pickle
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    RootModel,
    ValidationError,
    WrapValidator,
    field_validator,
    model_validator,
)
from reactivex import abc as rx_abc
from reactivex.subject import Subject

import rxllm
from rxllm import Content, LlmResponse, Part
from rxllm._core import prevalidated
from rxllm._core.errors import EventTooLargeError, LineTooLongError
from rxllm._models.aggregation import build_partial
from rxllm._models.sse import SseDecoder, SseEvent
from rxllm._rx import direct
from rxllm._rx.buffer import END, LOCK, WAIT, StreamBuffer
from rxllm._rx.direct import DisposeAction, Slot

_WAIT = 10  # seconds an event or barrier may take before the test fails (never reached when correct)


class _Counted(rx_abc.DisposableBase):
    def __init__(self) -> None:
        self.disposals = 0

    def dispose(self) -> None:
        self.disposals += 1


# --- Slot, the serial slot, DisposeAction ----------------------------------------------------------------


def _racing(base: type[Slot]) -> type[Slot]:
    """``base`` whose ``disposed`` flag runs a hook at its n-th read, before or after the value is taken:
    what another thread's ``dispose`` landing exactly there does."""

    flag = Slot.__dict__["disposed"]  # the slot's own descriptor

    class Racing(base):  # type: ignore[valid-type, misc]
        __slots__ = ("after", "at", "hook", "reads")

        def __init__(self) -> None:
            self.reads, self.at, self.after = 0, 0, False
            self.hook: Callable[[], None] | None = None
            super().__init__()

        @property  # type: ignore[override]
        def disposed(self) -> bool:
            self.reads += 1
            hook = self.hook if self.reads == self.at else None
            if hook is not None and not self.after:
                self.hook = None
                hook()
            value: bool = flag.__get__(self)
            if hook is not None and self.after:
                self.hook = None
                hook()
            return value

        @disposed.setter
        def disposed(self, value: bool) -> None:
            flag.__set__(self, value)

    return Racing


@pytest.mark.parametrize("after", [False, True], ids=["before-read", "after-read"])
@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_dispose_landing_anywhere_in_a_set_disposes_what_was_set(at: int, after: bool) -> None:
    slot = _racing(Slot)()
    slot.reads, slot.at, slot.after, slot.hook = 0, at, after, slot.dispose  # type: ignore[attr-defined]
    held = _Counted()
    slot.set(held)
    if slot.hook is not None:  # type: ignore[attr-defined]  # (set read the flag fewer times: dispose after it)
        slot.dispose()
    assert held.disposals >= 1
    later = _Counted()
    slot.set(later)
    assert later.disposals == 1


def test_set_and_dispose_on_two_threads_at_once_never_leave_a_disposable_undisposed() -> None:
    for _ in range(200):
        slot = Slot()
        held = _Counted()
        barrier = threading.Barrier(2, timeout=_WAIT)

        def disposer(slot: Slot = slot, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            slot.dispose()

        other = threading.Thread(target=disposer)
        other.start()
        barrier.wait()
        slot.set(held)
        other.join(_WAIT)
        assert held.disposals >= 1


def test_a_dispose_action_runs_once_when_disposed_again_inside_it_and_from_many_threads() -> None:
    calls: list[int] = []
    action: DisposeAction

    def once() -> None:
        calls.append(1)
        action.dispose()  # re-entrant: already taken

    action = DisposeAction(once)
    action.dispose()
    action.dispose()
    assert calls == [1]

    counted: list[int] = []
    lock = threading.Lock()

    def count() -> None:
        with lock:
            counted.append(1)

    shared = DisposeAction(count)
    barrier = threading.Barrier(8, timeout=_WAIT)

    def dispose() -> None:
        barrier.wait()
        shared.dispose()

    threads = [threading.Thread(target=dispose) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_WAIT)
    assert counted == [1]


# --- Direct.subscribe: the source ending on another thread while it is being subscribed -------------------


@contextlib.contextmanager
def _racing_sink(at: int, after: bool) -> Iterator[list[Any]]:
    """``direct._Sink`` replaced by one whose ``stopped`` flag completes the sink at its ``at``-th read
    after the subscribe function returned (the source's own thread ending it then); yields the sinks."""
    flag = direct._Sink.__dict__["stopped"]
    made: list[Any] = []

    class Racing(direct._Sink):  # type: ignore[type-arg]
        __slots__ = ("armed", "reads")

        def __init__(self, *args: Any) -> None:
            self.reads, self.armed = 0, False
            super().__init__(*args)
            made.append(self)

        @property  # type: ignore[override]
        def stopped(self) -> bool:
            due = False
            if self.armed:
                self.reads += 1
                due = self.reads == at
                if due:
                    self.armed = False
            if due and not after:
                self.on_completed()
            value: bool = flag.__get__(self)
            if due and after:
                self.on_completed()
            return value

        @stopped.setter
        def stopped(self, value: bool) -> None:
            flag.__set__(self, value)

    saved = direct._Sink
    direct._Sink = Racing  # type: ignore[misc]
    try:
        yield made
    finally:
        direct._Sink = saved  # type: ignore[misc]


@pytest.mark.parametrize("after", [False, True], ids=["before-read", "after-read"])
@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_source_ending_while_a_direct_subscribe_returns_has_its_subscription_disposed(at: int, after: bool) -> None:
    inner = _Counted()
    seen: list[object] = []

    with _racing_sink(at, after) as sinks:

        def subscribe(observer: Any, scheduler: rx_abc.SchedulerBase | None = None) -> Any:
            observer.on_next(1)
            sinks[0].armed = True  # from here on, the source may end at any read of the flag
            return inner

        subscription = direct.Direct(subscribe).subscribe(seen.append, seen.append, lambda: seen.append("done"))
        if sinks[0].armed:  # subscribe read the flag fewer times: the source ends after it all
            sinks[0].armed = False
            sinks[0].on_completed()
    assert seen == [1, "done"]
    assert inner.disposals >= 1
    subscription.dispose()
    assert seen == [1, "done"]


# --- then_now / collect_then: a dispose racing the first source's completion ----------------------------


class _Tracked:
    """A cold source whose subscriptions are counted, completing (after ``items``) during subscribe
    or when :meth:`complete` is called; nothing disposes its subscription but its subscriber (no
    auto-detach on completion)."""

    def __init__(self, items: tuple[int, ...], now: bool) -> None:
        self.items, self.now = items, now
        self.subscriptions: list[_Counted] = []
        self.completions: list[Callable[[], None]] = []

    def observable(self) -> Any:
        return self

    def subscribe(
        self,
        on_next: Callable[[int], None],
        on_error: Callable[[Exception], None] | None = None,
        on_completed: Callable[[], None] | None = None,
        *,
        scheduler: rx_abc.SchedulerBase | None = None,
    ) -> _Counted:
        if not callable(on_next):  # an observer
            observer: Any = on_next
            on_next, on_completed = observer.on_next, observer.on_completed
        subscription = _Counted()
        self.subscriptions.append(subscription)
        assert on_completed is not None
        self.completions.append(on_completed)
        for item in self.items:
            on_next(item)
        if self.now:
            on_completed()
        return subscription

    def complete(self) -> None:
        for on_completed in self.completions:
            on_completed()


def _racing_first_then() -> type[Any]:
    flag = direct.TwoStages.__dict__["_disposed"]  # (the slot _FirstThen inherits)

    class Racing(direct._FirstThen):  # type: ignore[misc]
        __slots__ = ("after", "at", "reads")

        @property  # type: ignore[override]
        def _disposed(self) -> bool:
            self.reads += 1
            due = self.reads == self.at
            if due and not self.after:
                self.dispose()  # another thread's dispose, landing at this read (before it)
            value: bool = flag.__get__(self)
            if due and self.after:
                self.dispose()  # (or just after it: the value read is stale)
            return value

        @_disposed.setter
        def _disposed(self, value: bool) -> None:
            flag.__set__(self, value)

    return Racing


@pytest.mark.parametrize("after", [False, True], ids=["before-read", "after-read"])
@pytest.mark.parametrize("now", [True, False], ids=["completes-in-subscribe", "completes-later"])
@pytest.mark.parametrize("at", [1, 2, 3, 4, 5, 6])
def test_a_dispose_landing_anywhere_in_first_then_disposes_every_subscription_and_stops_delivery(
    at: int, now: bool, after: bool
) -> None:
    first, second = _Tracked((1,), now), _Tracked((2,), True)
    seen: list[object] = []
    racing = _racing_first_then()(lambda: second.observable(), (), _Observer(seen), None)
    racing.reads, racing.at, racing.after = 0, at, after
    racing.start(first.observable(), seen.append)
    if not now and not direct.TwoStages.__dict__["_disposed"].__get__(racing):
        first.complete()  # (a disposed subscriber hears nothing more: the source may never complete)
    if racing.reads < at:  # fewer reads than ``at``: the dispose comes after it all
        racing.dispose()
    for subscription in first.subscriptions + second.subscriptions:
        assert subscription.disposals >= 1
    # once disposed, the second source is never subscribed (or its subscription is disposed at once)
    assert seen[:1] == [1]
    assert "completed" not in seen or seen == [1, 2, "completed"]


class _Observer(rx_abc.ObserverBase[Any]):
    def __init__(self, seen: list[object]) -> None:
        self.seen = seen

    def on_next(self, value: Any) -> None:
        self.seen.append(value)

    def on_error(self, error: Exception) -> None:
        self.seen.append(error)

    def on_completed(self) -> None:
        self.seen.append("completed")


# --- StreamBuffer: the first-item slot and the lazy condition -------------------------------------------


class _Buffer(StreamBuffer[int]):
    """A buffer whose consumer polls by hand; says when a thread is about to wait on the condition."""

    __slots__ = ("waiting",)

    def __init__(self, source: rx_abc.ObservableBase[int], max_buffer: int) -> None:
        super().__init__(source, max_buffer)
        self.waiting = threading.Event()

    def _arrived(self) -> Callable[[], None] | None:
        return None

    def _condition(self) -> threading.Condition:
        self.waiting.set()  # (under the lock: whoever takes it next finds the waiter inside wait())
        return super()._condition()

    def take(self) -> Any:
        with LOCK:
            return self.poll()


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("next"), st.integers(0, 99)),
        st.just(("poll",)),
        st.just(("complete",)),
        st.just(("error",)),
        st.just(("close",)),
    ),
    max_size=40,
)


@settings(max_examples=120, deadline=None)
@given(_OPS)
def test_the_buffer_hands_out_what_a_plain_queue_would(ops_: list[tuple[Any, ...]]) -> None:
    subject: Subject[int] = Subject()
    buffer = _Buffer(subject, max_buffer=1000)
    buffer.start()
    queue: deque[int] = deque()
    terminal: list[Exception | None] = []
    closed = finished = False
    failure = ValueError("boom")
    for op in ops_:
        if op[0] == "next":
            subject.on_next(op[1])
            if not (closed or terminal):
                queue.append(op[1])
        elif op[0] in ("complete", "error"):
            if op[0] == "complete":
                subject.on_completed()
            else:
                subject.on_error(failure)
            if not (closed or terminal):
                terminal.append(None if op[0] == "complete" else failure)
            subject = Subject()  # (a fresh subject: the next signals come from a source that ignores the end)
            buffer._source = None
            subject.subscribe(buffer._on_next, buffer._on_end, buffer._on_end)
        elif op[0] == "close":
            buffer.close()
            closed = True
            queue.clear()
        else:
            if queue:
                expected: Any = queue.popleft()
            elif closed or finished:
                expected = END
            elif terminal:
                finished = True
                expected = END if terminal[0] is None else terminal[0]
            else:
                expected = WAIT
            if isinstance(expected, Exception):
                with pytest.raises(ValueError):
                    buffer.take()
            else:
                assert buffer.take() is expected if expected in (END, WAIT) else buffer.take() == expected


def test_an_emitter_waiting_for_room_is_woken_by_a_poll_and_returns_on_a_close() -> None:
    subject: Subject[int] = Subject()
    disposed = threading.Event()

    def subscribe(observer: rx_abc.ObserverBase[int], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        inner = subject.subscribe(observer)
        return DisposeAction(lambda: (disposed.set(), inner.dispose()))

    buffer = _Buffer(reactivex.create(subscribe), max_buffer=1)
    buffer.start()
    assert buffer._cond is None  # nothing waited yet: no condition built
    emitted: list[int] = []

    def emit() -> None:
        for item in (1, 2, 3):
            subject.on_next(item)
            emitted.append(item)

    emitter = threading.Thread(target=emit)
    emitter.start()
    assert buffer.waiting.wait(_WAIT)  # item 1 buffered, the emitter waits for room for item 2
    buffer.waiting.clear()
    assert buffer.take() == 1  # (takes the lock only once the emitter waits: then wakes it)
    assert buffer.waiting.wait(_WAIT)  # item 2 buffered, waiting for room for item 3
    assert emitted == [1, 2]
    buffer.close()  # the consumer leaves while the emitter waits
    emitter.join(_WAIT)
    assert not emitter.is_alive() and emitted == [1, 2, 3]
    assert disposed.is_set()
    assert buffer.take() is END


def test_a_blocking_consumer_gets_every_item_in_order_from_an_emitter_one_item_ahead() -> None:
    count = 400
    threads: list[threading.Thread] = []

    def subscribe(observer: rx_abc.ObserverBase[int], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        def emit() -> None:  # on another thread: waits for room after every item
            for item in range(count):
                observer.on_next(item)
            observer.on_completed()

        threads.append(threading.Thread(target=emit))
        threads[0].start()
        return DisposeAction(lambda: None)

    got = list(rxllm.iterate(reactivex.create(subscribe), max_buffer=1))
    threads[0].join(_WAIT)
    assert got == list(range(count))


# --- prevalidated instances and the partials --------------------------------------------------------------


def _validated_partial(text: str | None, thought: str | None) -> LlmResponse:
    parts: list[dict[str, object]] = [{"text": thought, "thought": True}] if thought else []
    if text:
        parts.append({"text": text})
    return LlmResponse.model_validate({"content": {"role": "model", "parts": parts}, "partial": True})


def _hash_or_error(model: BaseModel) -> object:
    try:
        return hash(model)
    except TypeError as exc:
        return type(exc)


def _same_model(fast: BaseModel, slow: BaseModel) -> None:
    assert type(fast) is type(slow)
    assert fast == slow and slow == fast
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__
    assert fast.__pydantic_private__ == slow.__pydantic_private__
    assert list(fast.__dict__) == list(slow.__dict__)
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)
    assert fast.model_dump_json(by_alias=True) == slow.model_dump_json(by_alias=True)
    assert repr(fast) == repr(slow)
    assert _hash_or_error(fast) == _hash_or_error(slow)
    for clone in (copy.copy(fast), copy.deepcopy(fast), pickle.loads(pickle.dumps(fast))):
        assert clone == slow and clone.model_fields_set == slow.model_fields_set
        assert clone.__pydantic_extra__ == slow.__pydantic_extra__
    assert type(fast).model_validate(fast.model_dump()) == slow
    assert type(fast).model_validate_json(fast.model_dump_json()) == slow
    assert type(fast).model_validate(fast) == slow


@pytest.mark.parametrize(("text", "thought"), [("hi", None), (None, "hmm"), ("hi", "hmm"), ("é\u2028", None)])
def test_a_partial_built_without_validation_is_the_validated_one_in_every_operation(
    text: str | None, thought: str | None
) -> None:
    fast, slow = build_partial(text, thought), _validated_partial(text, thought)
    _same_model(fast, slow)
    assert fast.content is not None and slow.content is not None
    _same_model(fast.content, slow.content)
    for mine, theirs in zip(fast.content.parts, slow.content.parts, strict=True):
        _same_model(mine, theirs)


def test_copying_one_partial_with_an_update_changes_no_other_partials_fields_set() -> None:
    one, two = build_partial("a", None), build_partial("b", None)
    updated = one.model_copy(update={"partial": None, "model_version": "m"})
    assert updated.model_fields_set == {"content", "partial", "model_version"}
    assert one.model_fields_set == two.model_fields_set == {"content", "partial"}
    assert updated == _validated_partial("a", None).model_copy(update={"partial": None, "model_version": "m"})
    part = two.content.parts[0]  # type: ignore[union-attr]
    copied = part.model_copy(update={"thought": True})
    assert part.model_fields_set == {"text"} and copied.model_fields_set == {"text", "thought"}
    assert build_partial("c", None).content.parts[0].model_fields_set == {"text"}  # type: ignore[union-attr]


def test_a_partial_refuses_assignment_and_deletion_as_a_validated_one_does() -> None:
    fast, slow = build_partial("a", None), _validated_partial("a", None)
    for model in (fast, slow):
        with pytest.raises(Exception) as caught:
            model.partial = False  # type: ignore[misc]
        assert type(caught.value).__name__ == "ValidationError"
        with pytest.raises(Exception) as caught:
            del model.partial
        assert type(caught.value).__name__ == "ValidationError"
    assert fast.model_fields_set == {"content", "partial"}  # (the shared set was not touched)
    assert build_partial("b", None).model_fields_set == {"content", "partial"}


class _Plain(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    size: int = 0


def test_an_instance_equals_the_validated_one_and_owns_its_fields_set() -> None:
    assert prevalidated.buildable(_Plain)
    one = prevalidated.instance(_Plain, {"name": "a", "size": 1}, {"name", "size"})
    _same_model(one, _Plain(name="a", size=1))
    two = prevalidated.instance(_Plain, {"name": "a", "size": 0}, {"name"})
    _same_model(two, _Plain(name="a"))
    assert two.model_copy(update={"size": 3}).model_fields_set == {"name", "size"}
    assert two.model_fields_set == {"name"}


class _WithFieldValidator(BaseModel):
    x: str

    @field_validator("x")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class _WithModelValidator(BaseModel):
    x: str

    @model_validator(mode="after")
    def _check(self) -> _WithModelValidator:
        return self


class _WithPostInit(BaseModel):
    x: str

    def model_post_init(self, context: Any) -> None:
        return None


class _WithPrivate(BaseModel):
    x: str
    _cache: dict[str, str] = PrivateAttr(default_factory=dict)


class _WithExtra(BaseModel):
    model_config = ConfigDict(extra="allow")
    x: str


class _Root(RootModel[list[int]]):
    pass


class _AfterInAnnotation(BaseModel):
    x: Annotated[str, AfterValidator(str.strip)]


class _BeforeInAnnotation(BaseModel):
    x: Annotated[str, BeforeValidator(str)]


class _PlainInAnnotation(BaseModel):
    x: Annotated[str, PlainValidator(str)]


class _WrapInAnnotation(BaseModel):
    x: Annotated[str, WrapValidator(lambda value, handler: handler(value))]


class _Inherits(_WithFieldValidator):
    y: int = 0


@pytest.mark.parametrize(
    "cls",
    [
        _WithFieldValidator,
        _WithModelValidator,
        _WithPostInit,
        _WithPrivate,
        _WithExtra,
        _Root,
        _AfterInAnnotation,
        _BeforeInAnnotation,
        _PlainInAnnotation,
        _WrapInAnnotation,
        _Inherits,
    ],
)
def test_a_class_whose_validation_does_work_is_not_buildable(cls: type[BaseModel]) -> None:
    assert not prevalidated.buildable(cls)


def test_the_classes_the_fast_paths_build_are_buildable() -> None:
    from rxllm.agents import Event, Session

    for cls in (LlmResponse, Content, Part, Event, Session):
        assert prevalidated.buildable(cls), cls


# --- the SSE decoder: the run-of-events path against the line path ---------------------------------------

_FIELDS = [
    b"data: x",
    b"data:y",
    b"data: caf\xc3\xa9 \xe2\x82\xac",
    b"data: \xe2\x82",
    b"data: \xff\xfe",
    b"data: ",
    b"data",
    b"data: data: z",
    b"event: ping",
    b"event: \xc3\xa9v",
    b"event:",
    b"id: 41",
    b"id: a\x00b",
    b"id",
    b"retry: 250",
    b"retry: 2x",
    b": comment",
    b":",
    b"other: 1",
    b'data: {"a": "\\n"}',
]
_EOLS = [b"\n", b"\r\n", b"\r"]


@st.composite
def _mixed_streams(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Blocks of the usual shapes (``data:``, ``event:`` + ``data:``) and odd ones, each with its
    own line end (a line end of another kind now and then), cut into reads."""
    blocks = []
    uniform = draw(st.sampled_from([None, *_EOLS]))  # one line end for the stream (runs), or any per line
    named = draw(st.booleans())  # (a run is all ``data:`` or all ``event:`` + ``data:`` events)
    for _ in range(draw(st.integers(min_value=0, max_value=14))):
        eol = uniform or draw(st.sampled_from(_EOLS))
        shape = draw(st.integers(min_value=0, max_value=12 if uniform else 5))
        if shape <= 2 or (uniform and shape <= 10):
            lines = [b"data: " + draw(st.sampled_from([b"v", b"{}", b"\xc3\xa9", b"\xe2\x82", b""]))]
            if shape == 1 or (uniform and named):
                lines.insert(0, b"event: " + draw(st.sampled_from([b"delta", b"", b"\xc3\xa9"])))
        else:
            lines = draw(st.lists(st.sampled_from(_FIELDS), min_size=1, max_size=4))
        if uniform and shape != 12:
            ends = [eol for _ in lines]
            block = b"".join(line + end for line, end in zip(lines, ends, strict=True))
            blocks.append(block + eol)
            continue
        ends = [draw(st.sampled_from([eol, eol, eol, *_EOLS])) for _ in lines]
        block = b"".join(line + end for line, end in zip(lines, ends, strict=True))
        blocks.append(block + draw(st.sampled_from([eol, eol, b"\n", b"\r\n", b"\r", eol + eol])))
    stream = b"".join(blocks) + draw(st.sampled_from([b"", b"data: tail", b"event: tail\n", b"\r", b"\xef\xbb"]))
    if draw(st.booleans()):
        stream = b"\xef\xbb\xbf" + stream
    cuts = sorted(draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=3 if uniform else 10)))
    return stream, cuts


def _decode(reads: list[bytes], *, fast: bool = True, **caps: int) -> tuple[list[SseEvent], type[Exception] | None]:
    decoder = SseDecoder(**caps)
    if not fast:
        decoder._max_fast = 0  # no read, block or run is small enough for a fast path: the line path only
    events: list[SseEvent] = []
    try:
        for read in reads:
            events.extend(decoder.feed(read))
    except (LineTooLongError, EventTooLargeError) as exc:
        return events, type(exc)
    return events, None


def _reads(stream: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=80, deadline=None)
@given(_mixed_streams())
def test_any_reads_decode_as_bytes_fed_one_by_one(case: tuple[bytes, list[int]]) -> None:
    stream, cuts = case
    one_by_one = [stream[i : i + 1] for i in range(len(stream))]  # never a whole event in one read
    assert _decode(_reads(stream, cuts)) == _decode(one_by_one) == _decode([stream])


@settings(max_examples=120, deadline=None)
@given(_mixed_streams())
def test_the_same_reads_decode_the_same_with_and_without_the_fast_paths(case: tuple[bytes, list[int]]) -> None:
    stream, cuts = case
    reads = _reads(stream, cuts)
    assert _decode(reads) == _decode(reads, fast=False)


@settings(max_examples=120, deadline=None)
@given(_mixed_streams(), st.integers(min_value=4, max_value=40), st.integers(min_value=4, max_value=60))
def test_under_small_caps_the_same_reads_fail_alike_with_and_without_the_fast_paths(
    case: tuple[bytes, list[int]], line_cap: int, event_cap: int
) -> None:
    # (the caps count the bytes held, so how the stream is cut into reads may decide whether one
    # fires: the fast paths are compared with the line path on the very same reads)
    stream, cuts = case
    reads = _reads(stream, cuts)
    caps = {"max_line_bytes": line_cap, "max_event_bytes": event_cap}
    assert _decode(reads, **caps) == _decode(reads, fast=False, **caps)


# --- prevalidated.template / from_template ------------------------------------------------------


class _Defaults(BaseModel):
    name: str
    count: int = 3
    label: str | None = None
    tags: tuple[str, ...] = ()


class _MutableDefault(BaseModel):
    name: str
    seen: list[str] = Field(default_factory=list)


def test_a_template_build_is_what_validation_builds() -> None:
    built = prevalidated.template(_Defaults, frozenset({"name", "label"}))
    assert built == {"name": None, "count": 3, "label": None, "tags": ()}
    made = prevalidated.from_template(_Defaults, built, {"name": "a"})
    validated = _Defaults(name="a")
    assert made == validated and list(made.__dict__) == list(validated.__dict__)
    assert made.model_fields_set == validated.model_fields_set == {"name"}
    assert made.model_dump_json() == validated.model_dump_json()


@pytest.mark.parametrize(
    ("cls", "given"),
    [
        (_MutableDefault, frozenset({"name"})),  # a factory default outside what is given: validation makes a new one
        (_Defaults, frozenset({"label"})),  # a required field outside what is given
    ],
)
def test_no_template_where_building_could_differ_and_then_from_template_validates(
    cls: type[BaseModel], given: frozenset[str]
) -> None:
    assert prevalidated.template(cls, given) is None
    with pytest.raises(ValidationError):  # (the validated path: a missing name is refused, not built)
        prevalidated.from_template(cls, None, {"label": "x"})
