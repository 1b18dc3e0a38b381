"""One HTTP/1.1 chunk per network read: the bytes of a chunked response body, re-framed.

A provider sends one HTTP chunk per SSE event, so a read of 64 KiB holds hundreds of chunks, and
h11 (under httpcore and httpx) turns each into an event that climbs five generators: that climb
cost more than everything rxllm does with the event (measured: 12 µs of a 15 µs floor per chunk).
:class:`ChunkCoalescer` sits between the socket and h11, in rxllm's network stream: it rewrites the
chunks that one read completed as *one* chunk carrying the same payload bytes, so h11 sees a valid
chunked body with one event per read. Nothing else changes: the payload, its order, the moment it
is handed over (a read's bytes are passed on at once, a partial chunk's too), the end of the body
(the terminating ``0`` chunk and trailers are passed through as they came, so h11 ends the message
and the connection is reused) and every error (malformed framing is passed through as it came,
from a chunk boundary, for h11 to reject as it would have).

Only what can be recognised for certain is re-framed: the response to a ``POST`` on an HTTP/1.1
connection whose head says ``Transfer-Encoding: chunked`` (one such header, no ``Content-Length``),
status 200-599 except 204 and 304. Anything else (other methods, ``HEAD``, HTTP/2's preface, an
upgrade, a head h11 might read differently) passes through untouched until the next request.

It also guards the connection against response smuggling. HTTP/1.1 frames a response by its
``Content-Length`` or its chunked terminator; bytes that arrive once the response is complete and
before the next request is written (past the ``Content-Length``, after the terminating chunk and
its trailers, or a whole unsolicited response) would be read by h11 as the answer to the *next*
request sent on that connection: a proxy or a compromised upstream could answer someone else's
call. The coalescer watches the framing of every HTTP/1.1 response with a ``Content-Length``, of
every chunked response to a ``POST`` and of every response without a body, and sets
:attr:`ChunkCoalescer.smuggled` for good when such bytes arrive; the network streams then report
the connection readable while idle (``get_extra_info("is_readable")``), which is what httpcore
takes for a connection the server closed: the pool closes it and never hands it out again. Bytes
that arrive on an idle connection after the response was read are covered by the same probe
(the socket itself is readable then).

Pure: fed the bytes written (:meth:`sent`) and read (:meth:`received`); no I/O.
"""

from __future__ import annotations

import re

__all__ = ["ChunkCoalescer"]

# h11's own rules (h11/_abnf.py, _receivebuffer.py): a head ends at the first ``\n\r?\n``; a chunk
# header is 1-20 hex digits, an optional ``;extension``, optional trailing blanks and CRLF.
_HEAD_END = re.compile(b"\n\r?\n")
_CHUNK_HEADER = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*\r\n")
_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([1-5][0-9][0-9])(?: [^\r\n]*)?\r?")
_MAX_HEAD = 64 * 1024  # a longer head is h11's to reject; it is passed through
_MAX_CHUNK_HEADER = 1024  # a longer chunk-size line is passed through (h11 rejects it)
# The byte runs between two chunks' data seen so far (``\r\n`` + a size line of hex digits only +
# ``\r\n``), each with its size: where a chunk ends, one slice and one lookup in here stand for the
# CRLF check, the line search, the regex and ``int`` (a quarter of the coalescer's work per chunk,
# measured). Shared by every connection (a provider's chunk sizes repeat); only sizes above 0 and
# lines h11 reads the same way enter, and it stops growing at ``_MAX_FRAMES`` entries.
_FRAMES: dict[bytes, int] = {}
_MAX_FRAMES = 1024

# States
_PASS = 0  # pass everything through until the next request
_HEAD = 1  # a response head is arriving (passed through, watched)
_SIZE = 2  # a chunk-size line is expected
_DATA = 3  # inside a chunk's data
_CRLF = 4  # the CRLF after a chunk's data is expected
_NEVER = 5  # not an HTTP/1.1 connection (HTTP/2, a tunnel): pass everything through, for good
_LENGTH = 6  # inside a Content-Length body (passed through, counted)
_TRAILER = 7  # after the terminating chunk: the trailers and their blank line are expected
_DONE = 8  # the response is complete: any byte before the next request is smuggled


class ChunkCoalescer:
    """Re-frames a connection's chunked response bodies, one chunk per read (see the module docstring)."""

    __slots__ = ("_bodiless", "_carry", "_gap", "_left", "_open", "_post", "_reading", "_state", "_tail", "smuggled")

    def __init__(self) -> None:
        self._state = _PASS
        self._reading = True  # a read happened since the last request began: the next write starts one
        self._post = False  # the request being answered is a POST
        self._bodiless = False  # the request being answered is a HEAD (its response has no body)
        self._tail = b""  # the trailer section read so far (state _TRAILER)
        self.smuggled = False  # bytes arrived after a complete response: never reuse this connection
        self._carry = b""  # bytes of a head, a chunk-size line or a chunk's CRLF not complete yet
        self._left = 0  # bytes of the current chunk's data still to come
        self._open = False  # a re-framed chunk went out without its closing CRLF
        self._gap = 6  # the length of the last run between two chunks' data (``\r\n72\r\n``)

    def sent(self, data: bytes) -> None:
        """Bytes were written on the connection (a request's head, or its body)."""
        if not self._reading or self._state == _NEVER or not data:
            return  # more of the same request (its body)
        self._reading = False
        line_end = data.find(b"\r\n")
        if line_end < 0 or not data.endswith(b" HTTP/1.1", 0, line_end):
            self._state = _NEVER  # HTTP/2's preface, or not a request line at all
            return
        self._post = data.startswith(b"POST ")
        self._bodiless = data.startswith(b"HEAD ")
        self._state = _HEAD
        self._carry = b""
        self._open = False

    def received(self, data: bytes) -> bytes:
        """The bytes to hand to h11 for ``data`` just read; ``b""`` for ``data`` that completed
        nothing yet (read again; only an empty ``data`` means the peer closed)."""
        self._reading = True
        state = self._state
        if state == _SIZE and not self._carry:
            # A read of exactly one whole chunk (a provider trickling tokens): nothing to merge, it
            # goes to h11 as it came. ``int`` reads the size as h11 does whenever both accept it
            # (h11 rejects the signs, prefixes, blanks and underscores ``int`` would take).
            line_end = data.find(b"\r\n", 0, 24)
            if line_end > 0:
                try:
                    size = int(data[:line_end], 16)
                except ValueError:
                    size = 0
                if size and len(data) == line_end + size + 4 and data.endswith(b"\r\n"):
                    return data
        elif state in (_PASS, _NEVER) or not data:
            return data
        elif state == _HEAD:
            return self._head(data)
        elif state == _LENGTH:
            self._length(data, 0)
            return data
        elif state == _TRAILER:
            self._trailer(data, 0)
            return data
        elif state == _DONE:
            self.smuggled = True
            return data
        return self._body(data, 0, b"")

    def _length(self, data: bytes, at: int) -> None:
        """Count a Content-Length body's bytes from ``at``; what comes after its end is smuggled."""
        size = len(data) - at
        if size < self._left:
            self._left -= size
            return
        if size > self._left:
            self.smuggled = True
        self._left = 0
        self._state = _DONE

    def _trailer(self, data: bytes, at: int) -> None:
        """Look for the blank line that ends the trailers (h11's rule: ``\n\r?\n``, the chunk-size
        line's own line break counting as the first ``\n``); what comes after it is smuggled."""
        tail = self._tail + data[at:]
        match = _HEAD_END.search(b"\n" + tail)
        if match is None:
            self._tail = tail
            if len(tail) > _MAX_HEAD:  # h11 rejects it
                self._state, self._tail = _PASS, b""
            return
        self._tail = b""
        self._state = _DONE
        if match.end() - 1 < len(tail):
            self.smuggled = True

    def _head(self, data: bytes) -> bytes:
        head = self._carry + data
        match = _HEAD_END.search(head)
        if match is None:
            if len(head) > _MAX_HEAD:
                self._state, self._carry = _PASS, b""
            else:
                self._carry = head
            return data
        self._carry = b""
        end = match.end()
        framing = self._framing(head[: match.start() + 1])
        if framing is None:
            self._state = _PASS
            return data
        status, length = framing
        start = end - (len(head) - len(data))  # where what follows the head begins in ``data``
        if status < 200:  # 100 Continue and the like: the real head follows
            return data[:start] + self._head(data[start:]) if start < len(data) else data
        if length is not None:  # a Content-Length body, or none at all: passed through, counted
            self._state, self._left = _LENGTH, length
            self._length(data, start)
            return data
        self._state = _SIZE
        return self._body(data, start, data[:start]) if start < len(data) else data

    def _framing(self, head: bytes) -> tuple[int, int | None] | None:
        """How a response head frames its body: ``(status, None)`` for a chunked body that is
        re-framed, ``(status, length)`` for a body of ``length`` bytes (0: none), ``(status, None)``
        for a 1xx head (another head follows); ``None`` for a head left to h11 alone (another
        request than a ``POST`` with a chunked body, a close-delimited body, an upgrade, a head h11
        might read differently)."""
        lines = head.split(b"\n")
        status = _STATUS_LINE.fullmatch(lines[0])
        if status is None:
            return None
        code = int(status[1])
        if code < 200:
            return None if code == 101 else (code, None)
        bodiless = self._bodiless or code in (204, 304)
        chunked = 0
        lengths: list[bytes] = []
        for line in lines[1:]:
            if not line or line == b"\r":
                continue
            if line[:1] in (b" ", b"\t"):
                return None  # a folded header: h11's reading of it is h11's business
            name, colon, value = line.partition(b":")
            if not colon:
                return None
            name = name.lower()
            if name == b"content-length":
                lengths.append(value.strip())
            elif name == b"transfer-encoding":
                if value.strip().lower() != b"chunked":
                    return None
                chunked += 1
        if bodiless:
            return code, 0
        if lengths:
            if chunked or len(lengths) != 1 or not lengths[0].isdigit() or len(lengths[0]) > 20:
                return None  # h11 rejects it, or reads it its own way
            return code, int(lengths[0])
        return (code, None) if chunked == 1 and self._post else None

    def _body(self, data: bytes, at: int, out: bytes) -> bytes:
        """Walk the chunks of ``data`` from ``at``; their payload goes out as one chunk after ``out``
        (head bytes passed through, if any).

        A re-framed chunk's closing CRLF goes out only once the original chunk's own CRLF arrived,
        so h11 stands where it would have at every byte that is passed through as it came: a
        terminating chunk, a chunk header h11 rejects, or a bad chunk footer h11 reports as such.
        """
        if self._carry:
            data = self._carry + data[at:]
            at = 0
            self._carry = b""
        payload: list[bytes] = []
        state, left, size = self._state, self._left, len(data)
        raw_from = -1  # where the bytes to pass through as they came begin
        terminated = -1  # where the trailers begin, after a terminating chunk
        frames, gap = _FRAMES, self._gap
        while at < size:
            if state == _DATA:
                end = at + left
                if end <= size:
                    payload.append(data[at:end])
                    at, left, state = end, 0, _CRLF
                else:
                    payload.append(data[at:])
                    left -= size - at
                    at = size
            elif state == _CRLF:
                # The usual case: this chunk's CRLF and the next one's size line, as seen before.
                start = at + gap
                chunk = frames.get(data[at:start])
                if chunk is not None and start < size:  # (a read that ends there: the slow path)
                    end = start + chunk
                    if end <= size:
                        payload.append(data[start:end])
                        at = end
                    else:
                        payload.append(data[start:])
                        left, at, state = end - size, size, _DATA
                    continue
                if data.startswith(b"\r\n", at):
                    at += 2
                    state = _SIZE
                elif size - at == 1 and data[at] == 13:  # the CR of a CRLF split between reads
                    self._carry = data[at:]
                    at = size
                else:
                    raw_from = at
                    break
            else:  # _SIZE
                line_end = data.find(b"\r\n", at)
                if line_end < 0:
                    if size - at > _MAX_CHUNK_HEADER:
                        raw_from = at
                        break
                    self._carry = data[at:]
                    at = size
                    continue
                header = _CHUNK_HEADER.fullmatch(data, at, line_end + 2)
                chunk = int(header[1], 16) if header is not None else 0
                if chunk == 0:  # the terminating chunk (h11 reads the trailers), or a header h11 rejects
                    raw_from = at
                    terminated = line_end + 2 if header is not None else -1
                    break
                if header is not None and header.end(1) == line_end:  # hex digits only: a run for _FRAMES
                    gap = line_end - at + 4
                    if len(frames) < _MAX_FRAMES:
                        frames[b"\r\n%b\r\n" % header[1]] = chunk
                at, left, state = line_end + 2, chunk, _DATA
        if payload:
            body = payload[0] if len(payload) == 1 else b"".join(payload)
            out += b"%b%x\r\n%b" % (b"\r\n" if self._open else b"", len(body), body)
            self._open = True
        if self._open and state == _SIZE:  # the original chunk's CRLF arrived: close ours
            out += b"\r\n"
            self._open = False
        if raw_from >= 0:
            out += data[raw_from:]
            state, self._carry, self._open = _PASS, b"", False
        self._state, self._left, self._gap = state, left, gap
        if terminated >= 0:
            self._state, self._tail = _TRAILER, b""
            self._trailer(data, terminated)
        return out
