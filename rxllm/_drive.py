"""The pure loop every stream runs: bytes → SSE events → chunks, until the provider's end marker.

Shared by :class:`~rxllm.SseChatModel` (bytes from the network) and
:func:`rxllm.testing.replay_sse` (recorded bytes), so a replayed transcript goes through exactly
the code a live stream does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ._chunk import Chunk
from ._provider import ChunkParser
from ._sse import DEFAULT_MAX_LINE_BYTES, SseDecoder

__all__ = ["drive_sse"]


def drive_sse(
    pieces: Iterable[bytes],
    parser: ChunkParser,
    on_chunk: Callable[[Chunk], None],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    is_cancelled: Callable[[], bool] | None = None,
) -> bool:
    """Feed ``pieces`` through a fresh SSE decoder and ``parser``, handing each chunk to ``on_chunk``.

    Returns:
        ``True`` when a chunk said ``end_of_stream`` (nothing after it is read), ``False`` when
        the bytes ran out first or ``is_cancelled()`` became true between reads.
    """
    decoder = SseDecoder(max_line_bytes=max_line_bytes)
    feed = decoder.feed
    parse = parser.parse
    for data in pieces:
        for event in feed(data):
            chunk = parse(event)
            if chunk is None:
                continue
            on_chunk(chunk)
            if chunk.end_of_stream:
                return True
        if is_cancelled is not None and is_cancelled():
            return False
    decoder.flush()
    return False
