"""ChunkCoalescer: h11 reads the same message through it as without it, in fewer events.

Every property feeds one response, cut into reads at arbitrary offsets, to two h11 client
connections: one straight, one through a :class:`ChunkCoalescer`. Both must see the same payload
bytes, in the same order, handed over no later (after each read, the coalesced side has seen at
least as much payload), the same end (``EndOfMessage`` with the same trailers) and, for malformed
framing, an error at the same point of the payload.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxllm._transports import coalesce
from rxllm._transports.coalesce import ChunkCoalescer

POST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@dataclass
class Seen:
    payload_after_each_read: list[int] = field(default_factory=list)
    payload: bytes = b""
    events: int = 0
    ended: list[tuple[bytes, bytes]] | None = None
    error: str | None = None


def _client() -> h11.Connection:
    connection = h11.Connection(h11.CLIENT)
    connection.send(
        h11.Request(method="POST", target="/v1/chat/completions", headers=[("Host", "x"), ("Content-Length", "2")])
    )
    connection.send(h11.Data(data=b"{}"))
    connection.send(h11.EndOfMessage())
    return connection


def _read(reads: list[bytes], coalescer: ChunkCoalescer | None, method: bytes = b"POST") -> Seen:
    connection, seen = _client(), Seen()
    if coalescer is not None:
        coalescer.sent(POST.replace(b"POST", method, 1))
        coalescer.sent(b"{}")
    payload = bytearray()
    try:
        for data in [*reads, None]:  # None: the peer closed
            if data is None:
                connection.receive_data(b"")
            else:
                fed = coalescer.received(data) if coalescer is not None else data
                if fed:  # the coalescer hands nothing over for a read that completed nothing
                    connection.receive_data(fed)
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    break
                if isinstance(event, h11.Data):
                    payload += event.data
                    seen.events += 1
                elif isinstance(event, h11.EndOfMessage):
                    seen.ended = [(bytes(k), bytes(v)) for k, v in event.headers.raw_items()]
                    break
            seen.payload_after_each_read.append(len(payload))
            if seen.ended is not None:
                break
    except h11.RemoteProtocolError as exc:
        seen.error = type(exc).__name__
    seen.payload = bytes(payload)
    return seen


def _cut(message: bytes, cuts: list[int]) -> list[bytes]:
    offsets = sorted({c % (len(message) + 1) for c in cuts} | {0, len(message)})
    return [message[a:b] for a, b in itertools.pairwise(offsets) if b > a]


def _chunked(pieces: list[bytes], *, extension: bool = False, trailers: bytes = b"") -> bytes:
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), b";x=1" if extension else b"", p) for p in pieces if p)
    return body + b"0\r\n" + trailers + b"\r\n"


def _same(message: bytes, cuts: list[int], method: bytes = b"POST") -> tuple[Seen, Seen]:
    reads = _cut(message, cuts)
    straight = _read(reads, None)
    coalesced = _read(reads, ChunkCoalescer(), method)
    assert coalesced.payload == straight.payload
    assert coalesced.ended == straight.ended
    assert coalesced.error == straight.error
    # never later: after every read, the coalesced side has at least the payload the straight one has
    n = min(len(straight.payload_after_each_read), len(coalesced.payload_after_each_read))
    assert all(
        c >= s for c, s in zip(coalesced.payload_after_each_read[:n], straight.payload_after_each_read[:n], strict=True)
    )
    return straight, coalesced


pieces = st.lists(st.binary(min_size=0, max_size=40), min_size=0, max_size=30)
cuts = st.lists(st.integers(min_value=0, max_value=4000), max_size=25)


@settings(max_examples=400, deadline=None)
@given(pieces, cuts, st.booleans(), st.sampled_from([b"", b"X-Checksum: abc\r\n"]))
def test_a_chunked_body_reads_the_same_through_the_coalescer(
    body: list[bytes], offsets: list[int], extension: bool, trailers: bytes
) -> None:
    _same(CHUNKED_HEAD + _chunked(body, extension=extension, trailers=trailers), offsets)


@settings(max_examples=300, deadline=None)
@given(pieces, cuts, st.integers(min_value=0, max_value=2000), st.binary(min_size=1, max_size=6))
def test_malformed_framing_fails_as_h11_fails(body: list[bytes], offsets: list[int], at: int, junk: bytes) -> None:
    message = CHUNKED_HEAD + _chunked(body)
    spot = len(CHUNKED_HEAD) + at % (len(message) - len(CHUNKED_HEAD))
    _same(message[:spot] + junk + message[spot:], offsets)


def test_one_event_per_read_for_many_small_chunks() -> None:
    events = [b'data: {"n":%d}\n\n' % i for i in range(400)]
    message = CHUNKED_HEAD + _chunked(events)
    straight, coalesced = _same(message, [len(message) // 2])
    assert straight.events == 400
    assert coalesced.events == 2  # one per read that carried payload


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 12\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
)
def test_heads_it_does_not_recognise_pass_through_untouched(head: bytes) -> None:
    coalescer = ChunkCoalescer()
    coalescer.sent(POST)
    body = _chunked([b"hello", b" world"])
    assert coalescer.received(head + body) == head + body
    assert coalescer.received(body) == body  # and the rest of that response too


@pytest.mark.parametrize(
    "request_head", [b"GET / HTTP/1.1\r\n\r\n", b"HEAD / HTTP/1.1\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"]
)
def test_only_a_post_on_http_1_1_is_coalesced(request_head: bytes) -> None:
    coalescer = ChunkCoalescer()
    coalescer.sent(request_head)
    message = CHUNKED_HEAD + _chunked([b"a", b"b", b"c"])
    assert coalescer.received(message) == message


def test_an_informational_response_comes_first() -> None:
    message = b"HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED_HEAD + _chunked([b"a", b"b", b"c"])
    coalescer = ChunkCoalescer()
    coalescer.sent(POST)
    out = coalescer.received(message)
    assert out == b"HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED_HEAD + b"3\r\nabc\r\n0\r\n\r\n"


def test_keep_alive_the_next_request_is_coalesced_again() -> None:
    coalescer = ChunkCoalescer()
    message = CHUNKED_HEAD + _chunked([b"a", b"b"])
    for _ in range(3):
        coalescer.sent(POST)
        coalescer.sent(b"{}")  # the request's body: not a new request
        assert coalescer.received(message) == CHUNKED_HEAD + b"2\r\nab\r\n0\r\n\r\n"


def test_a_read_that_completes_nothing_yields_nothing_and_an_empty_read_is_the_end() -> None:
    coalescer = ChunkCoalescer()
    coalescer.sent(POST)
    assert coalescer.received(CHUNKED_HEAD) == CHUNKED_HEAD
    assert coalescer.received(b"1") == b""  # half a chunk-size line: read again
    assert coalescer.received(b"0\r\nabc") == b"3\r\nabc"  # a 16-byte chunk, 3 bytes of it so far
    assert coalescer.received(b"") == b""  # the peer closed


size_styles = st.sampled_from(["%x", "%X", "00%x", "%x ", "%x;ext=1", "+%x", "0x%x", " %x", "%x\t", "-%x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=40), size_styles), min_size=1, max_size=12))
def test_one_chunk_per_read_with_any_size_spelling_reads_as_h11_reads_it(chunks: list[tuple[bytes, str]]) -> None:
    """The trickle shape (each read one whole chunk), with size lines h11 accepts and rejects."""
    reads = [CHUNKED_HEAD] + [(style % len(data)).encode() + b"\r\n" + data + b"\r\n" for data, style in chunks]
    reads.append(b"0\r\n\r\n")
    straight, coalesced = _read(reads, None), _read(reads, ChunkCoalescer())
    assert (coalesced.payload, coalesced.ended, coalesced.error) == (straight.payload, straight.ended, straight.error)


def _smuggled(message: bytes, extra: bytes, cuts: list[int], method: bytes = b"POST") -> tuple[bool, bytes]:
    """Feed ``message + extra`` in reads; the coalescer's verdict and what h11 kept after the message."""
    coalescer = ChunkCoalescer()
    coalescer.sent(POST.replace(b"POST", method, 1))
    coalescer.sent(b"{}")
    connection = _client()
    for data in _cut(message + extra, cuts):
        fed = coalescer.received(data)
        if fed:
            connection.receive_data(fed)
    while (event := connection.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
        if isinstance(event, h11.EndOfMessage):
            break
    assert connection.their_state is h11.DONE
    return coalescer.smuggled, connection.trailing_data[0]


LENGTH_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"


@settings(max_examples=300, deadline=None)
@given(pieces, cuts, st.binary(min_size=0, max_size=30), st.booleans(),
       st.sampled_from([b"", b"X-Checksum: abc\r\n"]))
def test_bytes_after_a_complete_response_mark_the_connection_smuggled(
    body: list[bytes], offsets: list[int], extra: bytes, chunked: bool, trailers: bytes
) -> None:
    """Exactly when h11 keeps bytes past the end of the response (that the next request would read
    as its answer), the coalescer says so, at any cut of the reads."""
    if chunked:
        message = CHUNKED_HEAD + _chunked(body, trailers=trailers)
    else:
        payload = b"".join(body)
        message = LENGTH_HEAD % len(payload) + payload
    smuggled, trailing = _smuggled(message, extra, offsets)
    assert smuggled == bool(trailing) == bool(extra)


@pytest.mark.parametrize("method", [b"POST", b"GET", b"HEAD"])
def test_a_response_without_a_body_is_complete_at_its_head(method: bytes) -> None:
    head = b"HTTP/1.1 204 No Content\r\n\r\n" if method != b"HEAD" else LENGTH_HEAD % 12
    coalescer = ChunkCoalescer()
    coalescer.sent(method + b" / HTTP/1.1\r\n\r\n")
    coalescer.received(head)
    assert coalescer.smuggled is False
    coalescer.received(b"HTTP/1.1 200 OK\r\n")  # an unsolicited response on the idle connection
    assert coalescer.smuggled is True


def test_a_smuggled_connection_stays_marked_across_requests() -> None:
    coalescer = ChunkCoalescer()
    coalescer.sent(POST)
    coalescer.received(LENGTH_HEAD % 2 + b"okHTTP/1.1 200 OK\r\n")
    assert coalescer.smuggled
    coalescer.sent(POST)
    coalescer.received(LENGTH_HEAD % 2 + b"ok")
    assert coalescer.smuggled


@contextlib.contextmanager
def frames_known() -> Iterator[None]:
    """Every size line of 1-2 hex digits already known (lower and upper case, a leading zero), as after
    a long stream: each chunk boundary of the bodies below takes the lookup, not the line search."""
    saved = dict(coalesce._FRAMES)
    for n in range(1, 256):
        for spelling in (b"%x" % n, b"%X" % n, b"0%x" % n):
            coalesce._FRAMES[b"\r\n%b\r\n" % spelling] = n
    try:
        yield
    finally:
        coalesce._FRAMES.clear()
        coalesce._FRAMES.update(saved)


@settings(max_examples=200, deadline=None)
@given(pieces, cuts, st.booleans(), st.sampled_from([b"", b"X-Checksum: abc\r\n"]))
def test_known_chunk_boundaries_read_the_same(
    body: list[bytes], offsets: list[int], extension: bool, trailers: bytes
) -> None:
    with frames_known():
        _same(CHUNKED_HEAD + _chunked(body, extension=extension, trailers=trailers), offsets)


@settings(max_examples=200, deadline=None)
@given(pieces, cuts, st.integers(min_value=0, max_value=2000), st.binary(min_size=1, max_size=6))
def test_known_chunk_boundaries_with_malformed_framing_fail_as_h11_fails(
    body: list[bytes], offsets: list[int], at: int, junk: bytes
) -> None:
    message = CHUNKED_HEAD + _chunked(body)
    spot = len(CHUNKED_HEAD) + at % (len(message) - len(CHUNKED_HEAD))
    with frames_known():
        _same(message[:spot] + junk + message[spot:], offsets)


def test_only_plain_positive_size_lines_become_known() -> None:
    with frames_known():
        coalesce._FRAMES.clear()
        body = b"3;x=1\r\nabc\r\n2 \r\nde\r\n0A\r\n0123456789\r\n1\r\nf\r\n0\r\n\r\n"
        assert _read([CHUNKED_HEAD + body], ChunkCoalescer()).payload == b"abcde0123456789f"
        assert coalesce._FRAMES == {b"\r\n0A\r\n": 10, b"\r\n1\r\n": 1}
