"""Review of the transports' fast paths.

* The chunked-transfer coalescer's shared table of chunk boundaries (``coalesce._FRAMES``): a
  memo of "``\\r\\n`` + hex size line + ``\\r\\n``" -> size shared by every connection, so what one
  server sent decides which path another connection's bytes take. With the table empty and
  frozen, filled by a hostile server (every size spelled with leading zeros, in both cases) or
  full to its cap, every connection must hand h11 the very same bytes.
* The async transport's deadline heap (``_Deadline`` / ``_Deadlines``): one loop timer for every
  attempt's total timeout. Driven on a fake loop and fake tasks through a model: exactly the
  deadlines due and not exited expire, at their time (never early, never late), on any number
  of transports sharing the loop, through exits in any order and the heap's rebuilds.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxllm._transports import asynchronous, coalesce
from rxllm._transports.asynchronous import _Deadline, _Deadlines
from rxllm._transports.coalesce import ChunkCoalescer

POST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

# --- the coalescer's shared boundary table ---------------------------------------------------------------


@contextlib.contextmanager
def _table(frames: dict[bytes, int], cap: int) -> Iterator[dict[bytes, int]]:
    saved = coalesce._FRAMES, coalesce._MAX_FRAMES
    coalesce._FRAMES, coalesce._MAX_FRAMES = frames, cap
    try:
        yield frames
    finally:
        coalesce._FRAMES, coalesce._MAX_FRAMES = saved


def _fed(reads: list[bytes]) -> list[bytes]:
    """What one connection hands h11 for each read of a chunked response to a POST."""
    coalescer = ChunkCoalescer()
    coalescer.sent(POST)
    coalescer.sent(b"{}")
    return [coalescer.received(read) for read in reads]


def _hostile() -> dict[bytes, int]:
    """What a server spelling every size oddly leaves in the table: leading zeros, both cases."""
    frames: dict[bytes, int] = {}
    for n in range(1, 700):
        for spelling in (b"%x" % n, b"%X" % n, b"0%x" % n, b"00%X" % n, b"%06x" % n):
            frames[b"\r\n%b\r\n" % spelling] = n
    return frames


_HOSTILE = _hostile()
_SPELLINGS = ["%x", "%X", "0%x", "00%X", "%06x", "%x;e=1", "%x ", "%x\t"]


@st.composite
def _responses(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    chunks = []
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        size = draw(st.sampled_from([1, 2, 9, 15, 16, 17, 200, 255, 256, 300, 699]))
        data = bytes((65 + i % 26) for i in range(size))
        spelling = draw(st.sampled_from(_SPELLINGS)) % size
        chunks.append(spelling.encode() + b"\r\n" + data + b"\r\n")
    body = CHUNKED_HEAD + b"".join(chunks) + draw(st.sampled_from([b"0\r\n\r\n", b"0\r\nX-T: 1\r\n\r\n", b""]))
    cuts = sorted(draw(st.lists(st.integers(min_value=0, max_value=len(body)), max_size=8)))
    return body, cuts


def _reads(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=100, deadline=None)
@given(_responses())
def test_every_connection_hands_h11_the_same_bytes_whatever_the_shared_table_holds(
    case: tuple[bytes, list[int]],
) -> None:
    reads = _reads(*case)
    with _table({}, 0):  # nothing known, nothing learnt: the line search at every boundary
        plain = _fed(reads)
    with _table(dict(_HOSTILE), 1024):  # filled (past its cap) by a hostile server's spellings
        assert _fed(reads) == plain
    with _table({}, 1024) as frames:  # learnt from this very response, then read again with it known
        assert _fed(reads) == plain
        assert all(frames[key] == int(key[2:-2], 16) for key in frames)
        assert _fed(reads) == plain


def test_the_table_stops_growing_at_its_cap_and_full_it_still_reads_every_size() -> None:
    chunks = b"".join(b"%x\r\n%s\r\n" % (n, b"z" * n) for n in range(1, 40))
    reads = [CHUNKED_HEAD + chunks + b"0\r\n\r\n"]
    with _table({}, 0):
        plain = _fed(reads)
    with _table({b"\r\n%06x\r\n" % n: n for n in range(1, 9)}, 8) as frames:  # full already
        assert _fed(reads) == plain
        assert len(frames) == 8


def test_a_boundary_split_at_every_offset_reads_the_same_with_the_table_known() -> None:
    body = CHUNKED_HEAD + b"10\r\n" + b"a" * 16 + b"\r\n0010\r\n" + b"b" * 16 + b"\r\n1\r\nc\r\n0\r\n\r\n"
    for cut in range(len(CHUNKED_HEAD), len(body)):
        reads = [body[:cut], body[cut:]]
        with _table({}, 0):
            plain = _fed(reads)
        with _table(dict(_HOSTILE), 1024):
            assert _fed(reads) == plain, cut


# --- the deadline heap ---------------------------------------------------------------------------------------


class _Handle:
    def __init__(self, loop: _Loop, when: float, callback: Any) -> None:
        self.loop, self.when, self.callback = loop, when, callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _Handle) -> bool:
        return self.when < other.when


class _Loop:
    """The part of an event loop the deadlines use: a clock moved by hand and timers."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[_Handle] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any) -> _Handle:
        handle = _Handle(self, when, callback)
        heapq.heappush(self.timers, handle)
        return handle

    def advance(self, to: float) -> None:
        """Run every timer due by ``to``, earliest first (as the loop does, one tick at ``to``)."""
        self.now = to
        while self.timers and self.timers[0].when <= to:
            handle = heapq.heappop(self.timers)
            if not handle.cancelled:
                handle.callback()

    def live_timers(self) -> list[_Handle]:
        return [h for h in self.timers if not h.cancelled]


class _Task:
    def __init__(self) -> None:
        self.cancels = 0

    def cancel(self) -> bool:
        self.cancels += 1
        return True

    def cancelling(self) -> int:
        return self.cancels

    def uncancel(self) -> int:
        self.cancels -= 1
        return self.cancels


@contextlib.contextmanager
def _current(task: _Task) -> Iterator[None]:
    saved = asyncio.current_task
    asyncio.current_task = lambda loop=None: task  # type: ignore[assignment, misc]
    try:
        yield
    finally:
        asyncio.current_task = saved


def _run(coroutine: Any) -> None:
    with contextlib.suppress(StopIteration):
        coroutine.send(None)
    coroutine.close()


def _enter(deadline: _Deadline, task: _Task) -> None:
    with _current(task):
        _run(deadline.__aenter__())


def _exit(deadline: _Deadline, task: _Task) -> type[BaseException] | None:
    """Exit as ``async with`` would: with the CancelledError a cancel raised in the task, else normally;
    what comes out of it (the TimeoutError the exit raises, the CancelledError it lets through, or None)."""
    cancelled = task.cancels > 0
    with _current(task):
        try:
            if cancelled:
                _run(deadline.__aexit__(asyncio.CancelledError, asyncio.CancelledError(), None))
            else:
                _run(deadline.__aexit__(None, None, None))
        except TimeoutError as exc:
            return type(exc)
    return asyncio.CancelledError if cancelled else None


def _check_heap(deadlines: _Deadlines, loop: _Loop, live: list[_Deadline]) -> None:
    heap = deadlines._heap
    assert deadlines._released == sum(1 for d in heap if d.task is None)
    assert all(d in heap for d in live)  # (identity: every live deadline is registered)
    assert len([d for d in heap if d.task is not None]) == len(live)
    timers = [h for h in loop.live_timers() if h is deadlines._handle]
    if live:
        earliest = min(d.when for d in live)  # type: ignore[type-var]
        assert deadlines._handle is not None and not deadlines._handle.cancelled
        assert timers and deadlines._armed <= earliest  # never late
    else:  # nothing left to expire: nothing kept, no timer (the last exit or expiry cleared them)
        assert heap == [] and deadlines._handle is None and deadlines._released == 0


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("enter"), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 30))),
        st.tuples(st.just("exit"), st.integers(0, 2), st.integers(0, 10_000)),
        st.tuples(st.just("advance"), st.integers(0, 2), st.integers(0, 8)),
    ),
    max_size=80,
)


@settings(max_examples=120, deadline=None)
@given(_STEPS)
def test_exactly_the_due_deadlines_not_exited_expire_at_their_time_on_every_transport(
    steps: list[tuple[str, int, Any]],
) -> None:
    loop = _Loop()
    transports = [_Deadlines(loop) for _ in range(3)]  # type: ignore[arg-type]
    entered: list[list[tuple[_Deadline, _Task]]] = [[], [], []]  # still inside ``async with``
    expired: set[int] = set()  # ids of the deadlines whose task the expiry cancelled
    made: list[_Deadline] = []  # (every deadline kept alive: no id is reused)
    for kind, which, value in steps:
        deadlines = transports[which]
        if kind == "enter":
            deadline, task = _Deadline(deadlines, None if value is None else float(value)), _Task()
            _enter(deadline, task)
            entered[which].append((deadline, task))
            made.append(deadline)
        elif kind == "exit" and entered[which]:
            deadline, task = entered[which].pop(value % len(entered[which]))
            outcome = _exit(deadline, task)
            assert outcome is (TimeoutError if id(deadline) in expired else None)
            assert deadline.expired() is (id(deadline) in expired)
        elif kind == "advance":
            to = loop.now + value
            loop.advance(to)
            for group in entered:
                for deadline, task in group:
                    due = deadline.when is not None and deadline.when <= to + asynchronous._CLOCK_RESOLUTION
                    assert (task.cancels == 1) is due, (deadline.when, to)  # on time, never early
                    if due:
                        expired.add(id(deadline))
        for deadlines, group in zip(transports, entered, strict=True):
            live = [d for d, t in group if d.when is not None and t.cancels == 0]
            _check_heap(deadlines, loop, live)


def test_many_exits_rebuild_the_heap_and_the_rest_still_expire_in_order() -> None:
    loop = _Loop()
    deadlines = _Deadlines(loop)  # type: ignore[arg-type]
    pairs = []
    for n in range(300):
        deadline, task = _Deadline(deadlines, float(1 + n % 50)), _Task()
        _enter(deadline, task)
        pairs.append((deadline, task))
    kept = pairs[::4]
    for deadline, task in pairs:
        if (deadline, task) not in kept:
            assert _exit(deadline, task) is None
    assert len(deadlines._heap) < 300  # rebuilt without the exited ones
    _check_heap(deadlines, loop, [d for d, _ in kept])
    for when in range(1, 51):
        loop.advance(float(when))
        assert all((task.cancels == 1) is (deadline.when <= when) for deadline, task in kept)  # type: ignore[operator]
    for deadline, task in kept:
        assert _exit(deadline, task) is TimeoutError
    assert deadlines._heap == [] and deadlines._handle is None and deadlines._released == 0


def test_an_outside_cancel_of_an_expired_deadlines_task_is_not_taken_for_the_timeout() -> None:
    loop = _Loop()
    deadlines = _Deadlines(loop)  # type: ignore[arg-type]
    deadline, task = _Deadline(deadlines, 1.0), _Task()
    _enter(deadline, task)
    loop.advance(1.0)
    task.cancel()  # someone else cancels the task too (a dispose)
    assert _exit(deadline, task) is asyncio.CancelledError
    assert deadline.expired()


@pytest.mark.parametrize("delay", [0.0, -1.0])
def test_a_deadline_due_at_once_expires_at_the_next_tick(delay: float) -> None:
    loop = _Loop()
    loop.now = 5.0
    deadlines = _Deadlines(loop)  # type: ignore[arg-type]
    deadline, task = _Deadline(deadlines, delay), _Task()
    _enter(deadline, task)
    assert task.cancels == 0  # nothing runs inside the entry
    loop.advance(5.0)
    assert task.cancels == 1 and _exit(deadline, task) is TimeoutError
