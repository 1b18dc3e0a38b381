"""A pure, incremental Server-Sent Events decoder (the WHATWG ``text/event-stream`` rules).

``feed(bytes)`` returns the events completed by those bytes; at the end of the stream there is
nothing to take (:attr:`SseDecoder.has_pending` tells whether it ended in the middle of an event).
Lines end at CRLF, LF or CR (also when the CR and LF arrive in different reads); a line
starting with ``:`` is a comment; ``field: value`` strips one optional space after the colon;
``data`` lines join with ``\\n``; a blank line dispatches the event (an event with no data
is not dispatched); a leading UTF-8 BOM is skipped; ``id`` persists across events (an id
containing NUL is ignored); ``retry`` takes digits only; unknown fields are ignored. As the
standard says, an event that the stream ends in the middle of is discarded, never dispatched.

A line longer than ``max_line_bytes`` raises :class:`~rxllm.LineTooLongError` as soon as the
cap is passed, so an endless line costs bounded memory. One event is bounded too: the bytes held
for it (its ``data`` values, the line ends that join them, its ``event`` name, and the
unterminated line being read) may not pass ``max_event_bytes`` (by default twice
``max_line_bytes``, 16 MiB), or :class:`~rxllm.EventTooLargeError` is raised, so a body of
many short ``data:`` lines that never ends its event cannot grow without limit. The data of an
event is held as the bytes it came in (decoded once, when the event is dispatched), so the
memory held is the cap, not a multiple of it.

>>> d = SseDecoder()
>>> d.feed(b"event: ping\\ndata: {}\\n\\ndata: a\\r")
[SseEvent(event='ping', data='{}', id=None, retry=None)]
>>> d.feed(b"\\ndata: b\\n\\n")
[SseEvent(event='message', data='a\\nb', id=None, retry=None)]
"""

from __future__ import annotations

from typing import NamedTuple

from .._core.errors import EventTooLargeError, LineTooLongError

__all__ = ["DEFAULT_MAX_LINE_BYTES", "SseDecoder", "SseEvent"]

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_BLANK = [b""]  # the blank line that ends a block
_NO_DATA = b""  # an SseDecoder's data while no data line is held (a bytearray once one is)
_DEFAULT_MAX_EVENT = 2 * DEFAULT_MAX_LINE_BYTES


class SseEvent(NamedTuple):
    """One dispatched event: its type (``"message"`` by default), data, last event id and retry.

    An immutable NamedTuple: one is built per event on the hot path (4× cheaper than a frozen dataclass).
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


_event = tuple.__new__  # builds an SseEvent from a full 4-tuple, skipping NamedTuple's keyword-handling __new__


class SseDecoder:
    """Incremental decoder: bytes in, :class:`SseEvent` out. Pure; one per stream.

    Buffering is linear: the pieces of an unterminated line are kept in a list and joined
    once, when its line end arrives (a long line fed in small reads is not re-copied per read).
    """

    __slots__ = (
        "_at_start",
        "_data",
        "_event",
        "_has_data",
        "_last_id",
        "_max",
        "_max_event",
        "_max_fast",
        "_pending",
        "_pending_len",
        "_retry",
        "_skip_lf",
    )

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, max_event_bytes: int | None = None) -> None:
        self._max = max_line_bytes
        if max_event_bytes is None:  # (the default's own int object: none built per decoder)
            max_event_bytes = _DEFAULT_MAX_EVENT if max_line_bytes == DEFAULT_MAX_LINE_BYTES else 2 * max_line_bytes
        self._max_event = max_event_bytes
        self._max_fast = min(max_line_bytes, self._max_event)  # the largest read the fast paths take whole
        # pieces of an unterminated line carried to the next feed (a list once there is one; until
        # then the shared empty tuple, as _data is the shared empty bytes: an open stream whose reads
        # are whole events holds neither)
        self._pending: list[bytes] | tuple[()] = ()
        self._pending_len = 0
        self._skip_lf = False  # the last bytes fed ended in CR: a leading LF belongs to it
        self._at_start = True  # the BOM may only come first
        self._data: bytearray | bytes = _NO_DATA  # the event's data values so far, joined by LF, not yet decoded
        self._has_data = False  # a data line arrived (an empty one too: the event is dispatched)
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, data: bytes) -> list[SseEvent]:
        """Decode ``data`` and return the events it completed (possibly none).

        Raises:
            LineTooLongError: as soon as a line grows past ``max_line_bytes``.
            EventTooLargeError: as soon as the bytes held for one event pass ``max_event_bytes``.
        """
        if not data:
            return []
        # Fast paths: one whole event in one read, nothing carried over (the usual shape when a
        # provider sends one HTTP chunk per event): no splitting, no field dispatch. The line ends
        # must be the event's own (found where they end it), so anything else takes the general path.
        # (``find``, never ``b"\r" in data``: bytes' ``in`` first tries its operand as an integer,
        # raising and clearing a TypeError each time, about 1,800 instructions.)
        carried = self._pending or self._has_data or self._event or self._at_start or self._skip_lf
        if not (carried or len(data) > self._max_fast):
            last = len(data) - 2
            if data.startswith(b"data: "):
                if data.find(b"\n") == last and data.endswith(b"\n\n") and data.find(b"\r") < 0:
                    text = data[6:-2].decode("utf-8", "replace")  # ``data: ...\n\n`` (OpenAI)
                    return [_event(SseEvent, ("message", text, self._last_id, self._retry))]
                if data.find(b"\r") == last - 2 and data.find(b"\n") == last - 1 and data.endswith(b"\r\n\r\n"):
                    text = data[6:-4].decode("utf-8", "replace")  # ``data: ...\r\n\r\n`` (Gemini)
                    return [_event(SseEvent, ("message", text, self._last_id, self._retry))]
            elif data.startswith(b"event: ") and data.endswith(b"\n\n"):
                end = data.find(b"\n")  # ``event: name\ndata: ...\n\n`` (Anthropic)
                if data.startswith(b"data: ", end + 1) and data.find(b"\n", end + 1) == last and data.find(b"\r") < 0:
                    name = data[7:end].decode("utf-8", "replace") or "message"
                    text = data[end + 7 : -2].decode("utf-8", "replace")
                    return [_event(SseEvent, (name, text, self._last_id, self._retry))]
        if self._at_start:
            if self._pending:
                data = b"".join(self._pending) + data
                self._take_pending()
            if len(data) < 3 and _BOM.startswith(data):
                self._pending = [data]  # (just taken: empty)
                self._pending_len = len(data)
                return []
            self._at_start = False
            if data.startswith(_BOM):
                data = data[3:]
                if not data:
                    return []
        if self._skip_lf:
            self._skip_lf = False
            if data.startswith(b"\n"):
                data = data[1:]
                if not data:
                    return []
        if data.find(b"\n") < 0 and data.find(b"\r") < 0:
            self._pending_len += len(data)
            if self._pending_len > self._max:
                raise LineTooLongError(f"SSE line longer than {self._max} bytes without a line end")
            if self._has_data and self._pending_len + len(self._data) > self._max_event:
                self._too_large()
            pending = self._pending
            if isinstance(pending, list):
                pending.append(data)
            else:
                self._pending = [data]
            return []
        pending = self._pending
        if pending:
            data = (pending[0] if len(pending) == 1 else b"".join(pending)) + data
        events: list[SseEvent] = []
        if not self._has_data and len(data) + len(self._event) <= self._max_fast:  # (a carried name counts)
            done = self._run_of_events(data, events)
            if done:
                data = data[done:]
        if data.find(b"\r") >= 0:
            if data.endswith(b"\r"):
                self._skip_lf = True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # Split at the blank lines first: each block but the last is the lines of one event (a blank
        # line follows it); the last holds the lines not yet followed by a blank line, then the
        # unterminated line. A block of one of the usual shapes is dispatched without a line split.
        blocks = data.split(b"\n\n")
        rest = blocks.pop().split(b"\n")
        tail = rest.pop()
        if len(tail) > self._max:
            raise LineTooLongError(f"SSE line longer than {self._max} bytes without a line end")
        if tail:
            self._pending = [tail]
            self._pending_len = len(tail)
            if self._has_data and len(tail) + len(self._data) > self._max_event:
                self._too_large()
        elif pending:
            self._pending = ()
            self._pending_len = 0
        if blocks:
            lines = self._lines
            largest = self._max_fast
            clean = not (self._has_data or self._event)  # no event begun in an earlier read
            for block in blocks:
                if clean and len(block) <= largest:
                    if block.startswith(b"data: "):
                        if block.find(b"\n") < 0:  # ``data: ...`` (OpenAI, Gemini)
                            events.append(_event(SseEvent, ("message", block[6:].decode("utf-8", "replace"),
                                                            self._last_id, self._retry)))
                            continue
                    elif block.startswith(b"event: "):
                        end = block.find(b"\n")  # ``event: name\ndata: ...`` (Anthropic)
                        if end > 0 and block.startswith(b"data: ", end + 1) and block.find(b"\n", end + 1) < 0:
                            name = block[7:end].decode("utf-8", "replace") or "message"
                            events.append(_event(SseEvent, (name, block[end + 7:].decode("utf-8", "replace"),
                                                            self._last_id, self._retry)))
                            continue
                lines(block.split(b"\n"), events)
                lines(_BLANK, events)
                clean = True
        if rest:
            self._lines(rest, events)
        return events

    def _run_of_events(self, data: bytes, events: list[SseEvent]) -> int:
        """Dispatch the whole events at the start of ``data`` at once when every one has one of the
        usual shapes, ``data: ...`` or ``event: ...`` then ``data: ...``, all with the same line
        ends (LF, or CRLF), and nothing else is between them (no comment, no other field, no blank
        line more); return how many bytes they took (0: none, ``data`` is left to the line by line
        path). No data line of an earlier read is held (an ``event`` line may be: the first event's
        lines then begin with its ``data`` line), and ``data`` is within both caps.

        The same events as the line by line path, with one decode and one split per read instead of
        a dozen calls per event: the line ends and field names are ASCII, so decoding the run at
        once decodes every value as decoding it alone would, and counting the line ends proves that
        the separators the split cut at are the only ones there are.
        """
        if data.find(b"\r") < 0:
            cut = data.rfind(b"\n\n")
            eol = "\n"
        else:
            cut = data.rfind(b"\r\n\r\n")
            eol = "\r\n"
        if cut <= 0:
            return 0
        text = data[:cut].decode("utf-8", "replace")
        if self._event:  # the first event's name came in an earlier read: its line, written back
            text = f"event: {self._event}{eol}{text}"
        last_id, retry = self._last_id, self._retry
        if text.startswith("data: "):
            values = text.split(eol + eol + "data: ")
            ends = 2 * len(values) - 2  # the line ends of the separators, and no other
            if text.count("\n") != ends or (eol != "\n" and text.count("\r") != ends):
                return 0
            values[0] = values[0][6:]
            events += [_event(SseEvent, ("message", value, last_id, retry)) for value in values]
        elif text.startswith("event: "):
            pieces = text.split(eol + eol + "event: ")
            ends = 3 * len(pieces) - 2  # the separators' and one between the two lines of each event
            if text.count("\n") != ends or (eol != "\n" and text.count("\r") != ends):
                return 0
            pieces[0] = pieces[0][7:]
            inner = eol + "data: "
            found: list[SseEvent] = []
            for piece in pieces:
                name, between, value = piece.partition(inner)
                if not between:  # an event without its data line right after the name
                    return 0
                found.append(_event(SseEvent, (name or "message", value, last_id, retry)))
            events += found
        else:
            return 0
        self._event = ""
        return cut + 2 * len(eol)

    def _lines(self, lines: list[bytes], events: list[SseEvent]) -> None:
        """Take complete ``lines`` (no line ends) in order; the events they dispatch go to ``events``."""
        for line in lines:
            if not line:
                if self._has_data:
                    joined = self._data.decode("utf-8", "replace")
                    events.append(_event(SseEvent, (self._event or "message", joined, self._last_id, self._retry)))
                    self._data = _NO_DATA
                    self._has_data = False
                self._event = ""
                continue
            if len(line) > self._max:
                raise LineTooLongError(f"SSE line longer than {self._max} bytes")
            if line.startswith(b"data:"):
                self._add_data(line[6:] if line.startswith(b"data: ") else line[5:])
            elif not line.startswith(b":"):
                self._field(line)

    @property
    def has_pending(self) -> bool:
        """Whether bytes of an undispatched event are buffered (the stream ended mid-event)."""
        return bool(self._pending) or self._has_data

    def _add_data(self, value: bytes) -> None:
        held = self._data
        if held is _NO_DATA:
            held = self._data = bytearray()
        if self._has_data:
            held += b"\n"
        held += value
        self._has_data = True
        if len(held) + len(self._event) > self._max_event:
            self._too_large()

    def _too_large(self) -> None:
        self._data = _NO_DATA  # the cap fired: the event is dropped with the decoder
        self._has_data = False
        raise EventTooLargeError(
            f"SSE event larger than max_event_bytes={self._max_event} bytes without a blank line to end it"
        )

    def _take_pending(self) -> None:
        self._pending = ()
        self._pending_len = 0

    def _field(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        text = value.decode("utf-8", "replace")
        if name == b"event":
            self._event = text
            if len(self._data) + len(value) > self._max_event:
                self._too_large()
        elif name == b"data":  # "data" without a colon: an empty data line
            self._add_data(value)
        elif name == b"id":
            if "\x00" not in text:
                self._last_id = text
        elif name == b"retry" and text.isascii() and text.isdigit():
            self._retry = int(text)
