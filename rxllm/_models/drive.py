"""The pure loop every stream runs: bytes → SSE events → chunks, until the provider's end marker.

:class:`SseReader` is fed one network read at a time (by the threaded transport's loop, the
asyncio transport's ``async for``, or :func:`drive_sse` over recorded bytes), so a replayed
transcript goes through exactly the code a live stream does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .chunk import Chunk
from .provider import ChunkParser
from .sse import DEFAULT_MAX_LINE_BYTES, SseDecoder

__all__ = ["SseReader", "drive_sse"]

_END_OF_STREAM = Chunk._fields.index("end_of_stream")


class SseReader:
    """Feeds bytes through a fresh SSE decoder and ``parser``, handing each chunk to ``on_chunk``."""

    __slots__ = ("_decoder", "_on_chunk", "_parse")

    def __init__(
        self, parser: ChunkParser, on_chunk: Callable[[Chunk], None], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    ) -> None:
        self._decoder = SseDecoder(max_line_bytes=max_line_bytes)
        self._parse = parser.parse
        self._on_chunk = on_chunk

    def feed(self, data: bytes) -> bool:
        """Take one read; ``True`` once a chunk said ``end_of_stream`` (read nothing more after it)."""
        parse = self._parse
        on_chunk = self._on_chunk
        for event in self._decoder.feed(data):
            chunk = parse(event)
            if chunk is None:
                continue
            on_chunk(chunk)
            if chunk[_END_OF_STREAM]:  # by position: one field read per event, without the property
                return True
        return False


def drive_sse(
    pieces: Iterable[bytes],
    parser: ChunkParser,
    on_chunk: Callable[[Chunk], None],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    is_cancelled: Callable[[], bool] | None = None,
) -> bool:
    """Run ``pieces`` through an :class:`SseReader`.

    Returns:
        ``True`` when a chunk said ``end_of_stream`` (nothing after it is read), ``False`` when
        the bytes ran out first or ``is_cancelled()`` became true between reads.
    """
    reader = SseReader(parser, on_chunk, max_line_bytes=max_line_bytes)
    feed = reader.feed
    for data in pieces:
        if feed(data):
            return True
        if is_cancelled is not None and is_cancelled():
            return False
    return False
