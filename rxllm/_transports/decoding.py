"""Bounded, incremental ``Content-Encoding`` decoding: raw body bytes in, decoded pieces out.

httpx decodes a whole network read at once: a 1,827-byte body sent as ``gzip, gzip`` grew to
2.1 GB before the SSE line cap saw a byte (issue 11). Here every layer of decompression is asked
for at most :data:`PIECE_BYTES` at a time (``zlib``'s ``max_length``), so the next stage (the SSE
decoder and its line cap) sees the bytes as they are produced, and a cap on the total decoded
size raises :class:`~rxllm.ResponseTooLargeError` as soon as it is passed. Pure: no I/O.

Supported: ``identity``, ``gzip`` (and ``x-gzip``), ``deflate`` (zlib-wrapped or raw, as httpx
accepts), stacked up to :data:`MAX_ENCODING_LAYERS` layers (``gzip, gzip``). Anything else
(``br``, ``zstd``, ...) is a :class:`~rxllm.ProtocolError` at once: rxllm only ever asks for
``gzip, deflate``.

>>> import gzip
>>> decoder = BodyDecoder("gzip", max_bytes=1_000)
>>> b"".join(decoder.feed(gzip.compress(b"data: hi\\n\\n"))) + b"".join(decoder.flush())
b'data: hi\\n\\n'
>>> bomb = gzip.compress(b"x" * 10_000)
>>> try:
...     b"".join(BodyDecoder("gzip", max_bytes=1_000).feed(bomb))
... except Exception as exc:
...     print(type(exc).__name__)
ResponseTooLargeError
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from .._core.errors import ProtocolError, ResponseTooLargeError

__all__ = ["ACCEPT_ENCODING", "MAX_ENCODING_LAYERS", "PIECE_BYTES", "BodyDecoder"]

PIECE_BYTES = 64 * 1024  # the most one decompression step may produce
MAX_ENCODING_LAYERS = 2  # "gzip, gzip" is legal HTTP; nobody needs three
ACCEPT_ENCODING = "gzip, deflate"  # what rxllm asks for (httpx would add br/zstd when installed)


class _Layer:
    """One ``zlib`` decompressor; ``deflate`` falls back to a raw stream when the zlib header is absent."""

    __slots__ = ("_decompress", "_name", "_started")

    def __init__(self, name: str) -> None:
        self._name = name
        self._started = False
        wbits = zlib.MAX_WBITS | 16 if name == "gzip" else zlib.MAX_WBITS
        self._decompress = zlib.decompressobj(wbits)

    def step(self, data: bytes) -> tuple[bytes, bytes]:
        """Decode at most ``PIECE_BYTES`` of output from ``data``; return it and the unconsumed input."""
        try:
            out = self._decompress.decompress(data, PIECE_BYTES)
        except zlib.error as exc:
            if self._name == "deflate" and not self._started:  # raw deflate, no zlib header
                self._decompress = zlib.decompressobj(-zlib.MAX_WBITS)
                self._started = True
                return self.step(data)
            raise ProtocolError(f"the response body is not valid {self._name} data: {exc}") from exc
        self._started = True
        return out, self._decompress.unconsumed_tail


class BodyDecoder:
    """Decodes one response body incrementally, never more than ``PIECE_BYTES`` at a time.

    Args:
        content_encoding: the response's ``Content-Encoding`` header (``""`` for none).
        max_bytes: the cap on the decoded body; ``None`` for no cap.
        provider: named in errors.

    Raises:
        ProtocolError: an encoding rxllm does not decode, too many layers, or corrupt data.
        ResponseTooLargeError: (from :meth:`feed`) the decoded body passed ``max_bytes``.
    """

    __slots__ = ("_layers", "_max", "_provider", "_total")

    def __init__(self, content_encoding: str, *, max_bytes: int | None, provider: str | None = None) -> None:
        names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
        names = ["gzip" if n == "x-gzip" else n for n in names if n != "identity"]
        unknown = sorted({n for n in names if n not in ("gzip", "deflate")})
        if unknown:
            raise ProtocolError(
                f"the response uses Content-Encoding {', '.join(unknown)}, which rxllm does not decode "
                f"(it asks for {ACCEPT_ENCODING})",
                provider=provider,
            )
        if len(names) > MAX_ENCODING_LAYERS:
            raise ProtocolError(
                f"the response stacks {len(names)} content encodings; at most {MAX_ENCODING_LAYERS} are decoded",
                provider=provider,
            )
        # Applied in the order listed, so decoded in reverse.
        self._layers = [_Layer(n) for n in reversed(names)]
        self._max = max_bytes
        self._provider = provider
        self._total = 0

    @property
    def identity(self) -> bool:
        """No decoding to do: the raw bytes are the body (the caller may skip :meth:`feed`, counting
        with :meth:`count`)."""
        return not self._layers

    def count(self, n: int) -> None:
        """Count ``n`` body bytes the caller passes on as they are (identity bodies).

        Raises:
            ResponseTooLargeError: the body passed ``max_bytes``.
        """
        self._count(n)

    @property
    def total(self) -> int:
        """Decoded bytes produced so far."""
        return self._total

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data`` (raw body bytes), each at most ``PIECE_BYTES`` long."""
        if not self._layers:
            if data:
                self._count(len(data))
                yield data
            return
        yield from self._through(0, data)

    def flush(self) -> Iterator[bytes]:
        """The end of the body: whatever the decompressors still hold, bounded like :meth:`feed`."""
        if self._layers:
            yield from self._through(0, b"")

    def _through(self, depth: int, data: bytes) -> Iterator[bytes]:
        if depth == len(self._layers):
            if data:
                self._count(len(data))
                yield data
            return
        layer = self._layers[depth]
        while True:
            out, data = layer.step(data)
            if out:
                yield from self._through(depth + 1, out)
            # Done when the input is used up and the last step was not cut short by max_length.
            if not data and len(out) < PIECE_BYTES:
                return

    def _count(self, n: int) -> None:
        self._total += n
        if self._max is not None and self._total > self._max:
            raise ResponseTooLargeError(
                f"the response body passed {self._max} bytes (decoded); it is not retried "
                "(raise the transport's size cap if this is expected)",
                limit_bytes=self._max,
                provider=self._provider,
            )
