"""SseDecoder against the WHATWG event-stream rules, any byte split, and the recorded transcripts."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transcripts import Transcript, load_manifest

from rxllm import EventTooLargeError, LineTooLongError, ProtocolError, SseDecoder, SseEvent

BOM = b"\xef\xbb\xbf"
TRANSCRIPTS = load_manifest()  # raises when tests/fixtures/transcripts or a file it lists is missing


def decode(*feeds: bytes, max_line_bytes: int | None = None) -> list[SseEvent]:
    decoder = SseDecoder() if max_line_bytes is None else SseDecoder(max_line_bytes=max_line_bytes)
    events: list[SseEvent] = []
    for piece in feeds:
        events.extend(decoder.feed(piece))
    return events


def bytewise(stream: bytes) -> list[bytes]:
    return [stream[i : i + 1] for i in range(len(stream))]


def reference_parse(stream: bytes) -> list[SseEvent]:
    """A deliberately naive, whole-stream reading of the WHATWG rules, to compare against."""
    text = stream.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    lines = re.split(r"\r\n|\r|\n", text)
    lines.pop()  # the unterminated tail never completes
    events: list[SseEvent] = []
    data: list[str] = []
    event_type = ""
    last_id: str | None = None
    retry: int | None = None
    for line in lines:
        if line == "":
            if data:
                events.append(SseEvent(event_type or "message", "\n".join(data), last_id, retry))
            data = []
            event_type = ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\x00" not in value:
            last_id = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return events


# --- line ends ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"], ids=["LF", "CR", "CRLF"])
def test_line_ends(eol: bytes) -> None:
    stream = b"event: a" + eol + b"data: 1" + eol + b"data: 2" + eol + eol + b"data: 3" + eol + eol
    assert decode(stream) == [SseEvent("a", "1\n2"), SseEvent("message", "3")]
    assert decode(*bytewise(stream)) == decode(stream)


def test_mixed_line_ends() -> None:
    assert decode(b"data: a\rdata: b\ndata: c\r\n\r\ndata: d\n\r") == [SseEvent(data="a\nb\nc"), SseEvent(data="d")]


def test_crlf_split_across_feeds_is_one_line_end() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    # The LF belongs to the CR before it: no blank line, so "a" is not dispatched alone.
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n\r") == [SseEvent(data="a\nb")]
    assert decoder.feed(b"\n") == []  # the LF of the blank line's CRLF: no second blank line
    assert decoder.feed(b"data: c\r\n\r\n") == [SseEvent(data="c")]


def test_crlf_split_with_an_empty_feed_between() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [SseEvent(data="a\nb")]


def test_cr_cr_is_two_line_ends() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\r") == [SseEvent(data="a")]


# --- fields -----------------------------------------------------------------------------------------------


def test_comments_are_ignored() -> None:
    assert decode(b": OPENROUTER PROCESSING\n\n:\ndata: x\n: inside\n\n") == [SseEvent(data="x")]


def test_event_data_id_retry_fields() -> None:
    assert decode(b"event: delta\ndata: {}\nid: 7\nretry: 3000\n\n") == [SseEvent("delta", "{}", "7", 3000)]


def test_event_type_resets_after_dispatch() -> None:
    assert decode(b"event: ping\ndata: 1\n\ndata: 2\n\n") == [SseEvent("ping", "1"), SseEvent("message", "2")]


def test_multi_line_data_joined_with_lf() -> None:
    assert decode(b"data: line one\ndata:\ndata: line three\n\n") == [SseEvent(data="line one\n\nline three")]


@pytest.mark.parametrize(
    ("line", "value"),
    [
        (b"data: x", "x"),
        (b"data:x", "x"),
        (b"data:  x", " x"),
        (b"data:   x ", "  x "),
        (b"data: ", ""),
        (b"data:", ""),
    ],
)
def test_exactly_one_optional_space_is_stripped(line: bytes, value: str) -> None:
    assert decode(line + b"\n\n") == [SseEvent(data=value)]


def test_one_space_stripped_for_other_fields_too() -> None:
    assert decode(b"event:  spaced\nid:  7\ndata: x\n\n") == [SseEvent(" spaced", "x", " 7")]


def test_field_with_no_colon_has_an_empty_value() -> None:
    # "data" alone appends an empty data line (the event is dispatched with data ""); "event" alone
    # resets the type to the default.
    assert decode(b"data\n\n") == [SseEvent(data="")]
    assert decode(b"data\ndata\n\n") == [SseEvent(data="\n")]
    assert decode(b"event: x\nevent\ndata: 1\n\n") == [SseEvent("message", "1")]


def test_unknown_fields_are_ignored() -> None:
    assert decode(b"foo: bar\nDATA: no\ndata : no\ndata: yes\n\n") == [SseEvent(data="yes")]


def test_events_without_data_are_not_dispatched() -> None:
    assert decode(b"event: ping\n\nid: 1\n\nretry: 5\n\n\n\n") == []


def test_id_persists_and_an_id_with_nul_is_ignored() -> None:
    stream = b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x003\ndata: c\n\nid\ndata: d\n\n"
    assert [(e.data, e.id) for e in decode(stream)] == [("a", "1"), ("b", "1"), ("c", "1"), ("d", "")]


def test_id_set_by_an_undispatched_event_persists() -> None:
    assert decode(b"id: 9\n\ndata: x\n\n") == [SseEvent(data="x", id="9")]


@pytest.mark.parametrize("value", [b"30a0", b"-1", b"1.5", b" 10", b"\xef\xbc\x93", b"\xc2\xb9", b""])
def test_retry_other_than_ascii_digits_is_ignored(value: bytes) -> None:
    assert decode(b"retry: 100\ndata: a\n\nretry: " + value + b"\ndata: b\n\n") == [
        SseEvent(data="a", retry=100),
        SseEvent(data="b", retry=100),
    ]


# --- BOM --------------------------------------------------------------------------------------------------


def test_bom_at_the_start_is_skipped() -> None:
    assert decode(BOM + b"data: x\n\n") == [SseEvent(data="x")]


def test_bom_split_byte_by_byte_is_skipped() -> None:
    stream = BOM + b"data: x\n\n"
    assert decode(*bytewise(stream)) == [SseEvent(data="x")]
    assert decode(BOM[:1], BOM[1:], b"data: x\n\n") == [SseEvent(data="x")]
    assert decode(BOM[:2], b"", BOM[2:] + b"data: x\n\n") == [SseEvent(data="x")]


def test_bom_later_is_not_skipped() -> None:
    # A second BOM, or one after the first line, is part of the field name: that line is ignored.
    assert decode(BOM + BOM + b"data: x\n\n") == []
    assert decode(b"data: a\n\n" + BOM + b"data: b\n\n") == [SseEvent(data="a")]
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n\n") == [SseEvent(data="a")]
    assert decoder.feed(BOM + b"data: b\n\n") == []


def test_bom_prefix_that_is_not_a_bom_is_kept() -> None:
    assert decode(b"\xef", b"data: x\n\n") == []  # "\ufffddata" is not a field rxllm knows
    assert decode(b":", b"\n", b"data: y\n\n") == [SseEvent(data="y")]


# --- end of stream -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("tail", [b"data: x", b"data: x\n", b"data: x\r", b"event: e\ndata: x\r\n"])
def test_unterminated_trailing_event_is_never_dispatched(tail: bytes) -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: done\n\n" + tail) == [SseEvent(data="done")]
    assert decoder.has_pending is True  # the stream ended inside an event: it is held, never dispatched


def test_nothing_pending_after_a_complete_stream() -> None:
    decoder = SseDecoder()
    decoder.feed(b"data: a\n\n: trailing comment\n")
    assert decoder.has_pending is False


# --- line length cap -------------------------------------------------------------------------------------------


def test_line_at_the_cap_is_accepted() -> None:
    line = b"data: " + b"x" * 10  # 16 bytes
    assert decode(line + b"\n\n", max_line_bytes=16) == [SseEvent(data="x" * 10)]
    assert decode(*bytewise(line + b"\n\n"), max_line_bytes=16) == [SseEvent(data="x" * 10)]


@pytest.mark.parametrize(
    "stream",
    [b"data: " + b"x" * 11 + b"\n\n", b"data: ok\n\n" + b"x" * 17, b"data: " + b"x" * 100],
    ids=["terminated", "unterminated-tail", "no-line-end"],
)
def test_line_too_long_in_one_piece(stream: bytes) -> None:
    decoder = SseDecoder(max_line_bytes=16)
    with pytest.raises(LineTooLongError, match="16 bytes"):
        decoder.feed(stream)


def test_line_growing_across_feeds_raises_as_soon_as_the_cap_is_passed() -> None:
    decoder = SseDecoder(max_line_bytes=16)
    for _ in range(16):
        assert decoder.feed(b"x") == []
    with pytest.raises(LineTooLongError):
        decoder.feed(b"x")


def test_line_growing_in_large_pieces_raises_on_the_piece_that_passes_the_cap() -> None:
    decoder = SseDecoder(max_line_bytes=1000)
    decoder.feed(b"data: a\n\ndata: ")
    for _ in range(9):
        decoder.feed(b"y" * 99)  # 6 + 891 bytes so far
    with pytest.raises(LineTooLongError):
        decoder.feed(b"y" * 200)


def test_carried_tail_completed_by_a_later_feed_counts_as_one_line() -> None:
    decoder = SseDecoder(max_line_bytes=16)
    decoder.feed(b"data: 123456")  # 12 bytes; 17 with the rest
    with pytest.raises(LineTooLongError):
        decoder.feed(b"67890\n\n")


def test_many_short_lines_never_hit_the_cap() -> None:
    stream = b"".join(b"data: %d\n\n" % i for i in range(2000))
    assert len(decode(stream, max_line_bytes=16)) == 2000
    assert len(decode(*[stream[i : i + 7] for i in range(0, len(stream), 7)], max_line_bytes=16)) == 2000


def test_line_too_long_is_a_protocol_error() -> None:
    assert issubclass(LineTooLongError, ProtocolError)


# --- UTF-8 -------------------------------------------------------------------------------------------------------


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode(b"data: \xff\xfe ok\nevent: \xc3\n\n") == [SseEvent("\ufffd", "\ufffd\ufffd ok")]


def test_multibyte_character_split_across_feeds() -> None:
    stream = "data: héllo 🌍 中文\n\n".encode()
    assert decode(*bytewise(stream)) == [SseEvent(data="héllo 🌍 中文")]


# --- any split gives the same events --------------------------------------------------------------------------------

SMALL_STREAM = BOM + b"event: a\r\ndata: 1\r\n\r\n: c\rid: 7\rdata:  2\r\rdata: \xc3\xa9\n\ndata: tail"


def test_every_single_split_point_of_a_small_stream() -> None:
    whole = decode(SMALL_STREAM)
    assert whole == reference_parse(SMALL_STREAM)
    assert len(whole) == 3
    for i in range(len(SMALL_STREAM) + 1):
        assert decode(SMALL_STREAM[:i], SMALL_STREAM[i:]) == whole, f"split at {i}"
        for j in range(i, min(i + 4, len(SMALL_STREAM)) + 1):
            assert decode(SMALL_STREAM[:i], SMALL_STREAM[i:j], SMALL_STREAM[j:]) == whole, f"split at {i}, {j}"


_ATOMS = [
    b"data", b"data:", b"data: ", b"event:", b"id:", b"retry:", b"foo:", b":", b" ", b"x", b"42", b"\xc3\xa9",
    b"\xf0\x9f\x8c", b"\x8d", b"\xff", b"\x00", b"\r", b"\n", b"\r\n", b"\n\n", b"\r\n\r\n", BOM,
]


def _split_points(draw: st.DrawFn, size: int) -> list[int]:
    return sorted(draw(st.lists(st.integers(min_value=0, max_value=size), max_size=12)))


def _pieces(stream: bytes, cuts: Iterable[int]) -> list[bytes]:
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def _streams_and_cuts(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    stream = b"".join(draw(st.lists(st.sampled_from(_ATOMS), max_size=60)))
    if draw(st.booleans()):
        stream = BOM + stream
    return stream, _split_points(draw, len(stream))


@settings(max_examples=300, deadline=None)
@given(_streams_and_cuts())
def test_any_byte_split_gives_the_same_events(case: tuple[bytes, list[int]]) -> None:
    stream, cuts = case
    whole = decode(stream)
    assert decode(*_pieces(stream, cuts)) == whole
    assert whole == reference_parse(stream)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200), st.data())
def test_arbitrary_bytes_split_anywhere_match_the_reference(stream: bytes, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=8)))
    assert decode(*_pieces(stream, cuts)) == reference_parse(stream)


# --- recorded transcripts --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transcript", TRANSCRIPTS, ids=lambda t: t.name)
def test_transcript_whole_and_byte_by_byte_give_identical_events(transcript: Transcript) -> None:
    stream = transcript.raw
    whole_decoder = SseDecoder()
    whole = whole_decoder.feed(stream)
    assert whole_decoder.has_pending is False  # every recorded file ends with a blank line
    assert decode(*bytewise(stream)) == whole
    assert whole == reference_parse(stream)
    assert len(whole) == transcript.expected["_info"]["sse_events"]


# --- the one-event-per-read fast paths give what the general path gives --------------------------------------------

_FAST_SHAPED = [
    b'data: {"a":1}\n\n',  # OpenAI
    b'data: {"a":1}\r\n\r\n',  # Gemini
    b'event: content_block_delta\ndata: {"a":1}\n\n',  # Anthropic
    b"data: \n\n",
    b"data:\n\n",
    b"data: x\r\n\n",  # mixed line ends: not the CRLF shape
    b"data: x\n\r\n",
    b"data: a\rb\n\n",  # a CR inside: two data lines
    b"data: a\r\n\r\n\r\n",
    b"data: a\nb\n\n",
    b"data: x\n\ndata: y\n\n",  # two events in one read
    b"data: x\r\n\r\ndata: y\r\n\r\n",
    b"event: \ndata: x\n\n",  # an empty event name means "message"
    b"event:ping\ndata: x\n\n",  # no space: the general path
    b"event:  two spaces\ndata: x\n\n",
    b"event: a\nid: 7\n\n",  # no data line
    b"event: a\ndata:x\n\n",
    b"event: a\r\ndata: x\r\n\r\n",
    b"event: a\ndata: x\r\n\n",
    b"event: a\ndata: x\n\ndata: y\n\n",
    b"data: caf\xc3\xa9 \xff\n\n",  # UTF-8 and an invalid byte (replaced)
    b"event: \xc3\xa9\xff\ndata: x\n\n",
    b": comment\n\n",
    b"id: 3\n\n",
    b"retry: 5\n\n",
    b"data: x",  # unterminated
    b"data: x\n",
    b"data: x\r\n\r",
]


@pytest.mark.parametrize("event", _FAST_SHAPED)
def test_a_whole_event_per_read_decodes_as_byte_by_byte(event: bytes) -> None:
    stream = b'data: {"first":1}\n\n' + event + b"id: 9\n\n" + event + b"data: end\n\n"
    reads = [b'data: {"first":1}\n\n', event, b"id: 9\n\n", event, b"data: end\n\n"]
    expected = reference_parse(stream)
    assert decode(*bytewise(stream)) == expected
    assert decode(*reads) == expected


def test_the_fast_paths_wait_for_a_carried_line_or_event() -> None:
    # Bytes carried over (a line, a data line, an event name, a CR, the start) must go through the general path.
    for before in (b"data: a", b"data: a\n", b"event: e\n", b"data: a\r", b"\xef\xbb", b"id: 1\n"):
        for event in (b"data: x\n\n", b"data: x\r\n\r\n", b"event: y\ndata: x\n\n"):
            stream = b"data: 0\n\n" + before + event
            assert decode(b"data: 0\n\n", before, event) == reference_parse(stream), (before, event)


def test_a_whole_event_over_the_line_cap_still_raises() -> None:
    for event in (b"data: " + b"x" * 20 + b"\n\n", b"data: " + b"x" * 20 + b"\r\n\r\n",
                  b"event: e\ndata: " + b"x" * 20 + b"\n\n"):
        decoder = SseDecoder(max_line_bytes=16)
        decoder.feed(b"data: 0\n\n")
        with pytest.raises(LineTooLongError):
            decoder.feed(event)


_LINES = [b"data: x", b"data:y", b"data: {\"k\":\"v\"}", b"event: e", b"event:", b"id: 4", b"retry: 9", b": c", b"data"]
_ENDS = [b"\n", b"\r\n", b"\r"]


@st.composite
def _event_reads(draw: st.DrawFn) -> list[bytes]:
    reads = []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        lines = draw(st.lists(st.sampled_from(_LINES), min_size=1, max_size=3))
        end = draw(st.sampled_from(_ENDS))
        reads.append(b"".join(line + end for line in lines) + end)
    return reads


@settings(max_examples=300, deadline=None)
@given(_event_reads())
def test_events_one_per_read_match_the_reference(reads: list[bytes]) -> None:
    stream = b"".join(reads)
    assert decode(b"", *reads) == decode(*bytewise(stream)) == reference_parse(stream)


# --- many whole events per read (the run of events dispatched at once) ----------------------------------------------

_VALUES = [b'{"k":"v"}', b"", b"a:b", b"caf\xc3\xa9", b"\xe2\x82", b"\xff", b"data: x", b"event: y", b" lead", b"\x00"]
_NAMES = [b"content_block_delta", b"", b"ping", b"a:b", b"\xc3\xa9"]


@st.composite
def _runs_of_events(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Streams of the usual event shapes, now and then something else between them, cut into a few reads."""
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    named = draw(st.booleans())
    blocks = []
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        value = draw(st.sampled_from(_VALUES))
        block = b"data: " + value
        if named:
            block = b"event: " + draw(st.sampled_from(_NAMES)) + eol + block
        odd = draw(st.integers(min_value=0, max_value=9))
        if odd == 1:  # another field, a comment, a second data line, no space after the colon, no data
            block = draw(st.sampled_from([b"id: 7", b": note", b"retry: 5", b"data: more", b"data:x", b"event: e"]))
            block += eol + b"data: " + value
        elif odd == 2:
            block = draw(st.sampled_from([b"event: only", b"data: 1" + eol + b"data: 2", b"data:x", b": c"]))
        elif odd == 3:  # a stray line end, or another kind of line end
            block += draw(st.sampled_from([eol, b"\r", b"\n", b"\r\n"]))
        blocks.append(block + eol + eol)
    stream = b"".join(blocks) + draw(st.sampled_from([b"", b"data: cut", b"event: cut" + eol, b"\r"]))
    return stream, _split_points(draw, len(stream))


@settings(max_examples=400, deadline=None)
@given(_runs_of_events())
def test_each_read_dispatches_exactly_the_events_it_completed(case: tuple[bytes, list[int]]) -> None:
    stream, cuts = case
    decoder = SseDecoder()
    events: list[SseEvent] = []
    fed = b""
    for piece in _pieces(stream, cuts):
        events.extend(decoder.feed(piece))
        fed += piece
        assert events == reference_parse(fed)


def test_a_run_of_events_with_a_name_carried_from_the_read_before() -> None:
    stream = b"event: a\ndata: 1\n\nevent: b\ndata: 2\n\nevent: c\ndata: 3\n\n"
    cut = stream.index(b"data: 2")
    decoder = SseDecoder()
    assert decoder.feed(stream[:cut]) == [SseEvent("a", "1")]
    assert decoder.feed(stream[cut:]) == [SseEvent("b", "2"), SseEvent("c", "3")]


def test_a_name_carried_from_the_read_before_counts_toward_the_event_cap() -> None:
    decoder = SseDecoder(max_line_bytes=64, max_event_bytes=40)
    assert decoder.feed(b"event: " + b"n" * 30 + b"\n") == []
    with pytest.raises(EventTooLargeError):  # 30 bytes of name and 20 of data
        decoder.feed(b"data: " + b"d" * 20 + b"\n\n")
