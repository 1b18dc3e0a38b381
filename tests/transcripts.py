"""Shared test helpers for the recorded provider transcripts in ``tests/fixtures/transcripts/``.

The fixtures are recorded provider streams kept in this repository (``SOURCES.md`` says where each
came from); their ``README.md`` defines how each ``.expected.json`` was computed, and
``manifest.json`` lists every file with its protocol and size. They are the only copy the tests
read: a missing folder, manifest or listed file is an error when the tests are collected, never a
skipped or empty parametrization. This module loads them, cuts byte streams into awkward reads,
replays reads through a parser and compares a final with its ``.expected.json``; it knows nothing
about any provider (the parser and the provider's usage mapping are passed in), so every
provider's tests can use it::

    from transcripts import assert_replay_matches_expected, awkward_splits, by_protocol, replay_reads

    @pytest.mark.parametrize("transcript", by_protocol("anthropic"), ids=lambda t: t.name)
    def test_replay(transcript):
        for pieces in awkward_splits(transcript.raw):
            responses, saw_end = replay_reads(pieces, AnthropicChunkParser(), StreamAggregator())
            assert_replay_matches_expected(responses, transcript.expected, usage=..., finish_reason=...)

Protocols in the manifest: ``openai-chat``, ``anthropic``, ``gemini``, ``openai-responses``.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rxllm import ChunkParser, FinishReason, LlmResponse, SseDecoder, StreamAggregator, UsageMetadata
from rxllm.testing import assert_stream_protocol

__all__ = [
    "AWKWARD_SPLIT_NAMES",
    "TRANSCRIPTS_DIR",
    "MissingTranscriptsError",
    "Transcript",
    "assert_replay_matches_expected",
    "awkward_splits",
    "by_name",
    "by_protocol",
    "load_manifest",
    "replay_reads",
    "split_at",
    "split_randomly",
]

TRANSCRIPTS_DIR = Path(__file__).resolve().parent / "fixtures" / "transcripts"
"""Where the recorded transcripts live (inside the repository, beside this module)."""

AWKWARD_SPLIT_NAMES = (
    "whole",
    "byte-at-a-time",
    "inside-utf8",
    "between-cr-lf",
    "random-seed-1",
    "random-seed-2",
    "random-seed-3",
)
"""Names of the splits :func:`awkward_splits` returns, in the same order (for test ids/messages)."""

_RANDOM_SPLITS = ((1, 2), (2, 16), (3, 200))  # (seed, pieces) of the seeded random splits


@dataclass(frozen=True)
class Transcript:
    """One recorded stream and its reference aggregate.

    Attributes:
        name: ``<provider_dir>/<file stem>``, e.g. ``"openai/chat-text-usage"`` (use as test id).
        protocol: ``"openai-chat"``, ``"anthropic"``, ``"gemini"`` or ``"openai-responses"``.
        sse_path: path of the ``.sse`` file.
        expected: the parsed ``.expected.json`` (keys described in the fixtures' README).
        raw: the ``.sse`` bytes, exactly as recorded.
        provider_dir: the directory the files are in (``"openai-compatible"``...).
        scenario: the manifest's one-line description of what the stream exercises.
    """

    name: str
    protocol: str
    sse_path: Path
    expected: dict[str, Any] = field(repr=False, compare=False)
    raw: bytes = field(repr=False)
    provider_dir: str = ""
    scenario: str = field(default="", repr=False)


class MissingTranscriptsError(RuntimeError):
    """The fixture folder, its manifest or a file the manifest lists is not there."""


@functools.cache
def _load() -> tuple[Transcript, ...]:
    manifest = TRANSCRIPTS_DIR / "manifest.json"
    if not manifest.is_file():
        raise MissingTranscriptsError(f"no transcript manifest at {manifest}")
    entries = json.loads(manifest.read_text(encoding="utf-8"))
    if not entries:
        raise MissingTranscriptsError(f"{manifest} lists no transcripts")
    transcripts = []
    for entry in entries:
        sse_path = TRANSCRIPTS_DIR / entry["file"]
        for listed in (sse_path, TRANSCRIPTS_DIR / entry["expected"]):
            if not listed.is_file():
                raise MissingTranscriptsError(f"{manifest} lists {listed.name}, which is not in {listed.parent}")
        expected = json.loads((TRANSCRIPTS_DIR / entry["expected"]).read_text(encoding="utf-8"))
        transcripts.append(
            Transcript(
                name=entry["file"].removesuffix(".sse"),
                protocol=entry["protocol"],
                sse_path=sse_path,
                expected=expected,
                raw=sse_path.read_bytes(),
                provider_dir=entry["provider_dir"],
                scenario=entry.get("scenario", ""),
            )
        )
    return tuple(transcripts)


def load_manifest() -> list[Transcript]:
    """Every transcript in the manifest, in manifest order (files are read once per session)."""
    return list(_load())


def by_protocol(protocol: str) -> list[Transcript]:
    """The transcripts of one protocol (e.g. ``"openai-chat"``: both ``openai/`` and ``openai-compatible/``).

    Raises:
        ValueError: when no transcript has that protocol (a typo must not yield an empty, passing test).
    """
    found = [t for t in _load() if t.protocol == protocol]
    if not found:
        known = sorted({t.protocol for t in _load()})
        raise ValueError(f"no transcripts with protocol {protocol!r}; known: {known}")
    return found


def by_name(name: str) -> Transcript:
    """The transcript called ``name`` (``"openai/chat-refusal"``).

    Raises:
        KeyError: for an unknown name.
    """
    for transcript in _load():
        if transcript.name == name:
            return transcript
    raise KeyError(name)


def split_at(data: bytes, cuts: set[int] | list[int]) -> list[bytes]:
    """Cut ``data`` before each offset in ``cuts`` (offsets outside ``1..len-1`` are ignored).

    >>> split_at(b"abcd", [1, 3])
    [b'a', b'bc', b'd']
    """
    points = [0, *sorted(c for c in set(cuts) if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a] or [data]


def split_randomly(data: bytes, rng: random.Random, pieces: int) -> list[bytes]:
    """Cut ``data`` into ``pieces`` non-empty pieces at offsets drawn from ``rng``.

    ``pieces`` is capped at ``len(data)``; the pieces always join back to ``data``.

    >>> parts = split_randomly(b"hello world", random.Random(0), 4)
    >>> len(parts), b"".join(parts)
    (4, b'hello world')
    """
    if len(data) < 2 or pieces < 2:
        return [data]
    count = min(pieces, len(data)) - 1
    return split_at(data, rng.sample(range(1, len(data)), count))


def awkward_splits(data: bytes) -> list[list[bytes]]:
    """The ways a network may cut ``data`` into reads, each a list of pieces joining back to ``data``.

    In the order of :data:`AWKWARD_SPLIT_NAMES`:

    1. the whole body in one read;
    2. one byte per read;
    3. a cut before every UTF-8 continuation byte, i.e. inside every multi-byte character;
    4. a cut between every ``\\r`` and the ``\\n`` following it;
    5. three seeded random splits (2, 16 and 200 pieces), the same on every run.

    A split that does not apply to ``data`` (no multi-byte characters, no CRLF) is the whole body
    in one piece; it is kept so the list always has the same shape.

    >>> splits = awkward_splits("é\\r\\n".encode())
    >>> splits[2], splits[3]
    ([b'\\xc3', b'\\xa9\\r\\n'], [b'\\xc3\\xa9\\r', b'\\n'])
    """
    inside_utf8 = {i for i, byte in enumerate(data) if 0x80 <= byte < 0xC0}
    between_cr_lf = {i for i in range(1, len(data)) if data[i - 1] == 0x0D and data[i] == 0x0A}
    splits = [
        [data],
        [data[i : i + 1] for i in range(len(data))] or [data],
        split_at(data, inside_utf8),
        split_at(data, between_cr_lf),
    ]
    splits.extend(split_randomly(data, random.Random(seed), pieces) for seed, pieces in _RANDOM_SPLITS)
    return splits


def replay_reads(
    reads: Iterable[bytes], parser: ChunkParser, aggregator: StreamAggregator
) -> tuple[list[LlmResponse], bool]:
    """Feed ``reads`` through an SSE decoder, ``parser`` and ``aggregator``, as a stream delivers them.

    Reading stops after the first ``end_of_stream`` chunk. Returns every response (the partials,
    then the final) and whether an ``end_of_stream`` chunk arrived; a stream without one is
    finished all the same (an event it ended in the middle of is never dispatched).
    """
    decoder = SseDecoder()
    responses: list[LlmResponse] = []
    for piece in reads:
        for event in decoder.feed(piece):
            chunk = parser.parse(event)
            if chunk is None:
                continue
            responses.extend(aggregator.accept(chunk))
            if chunk.end_of_stream:
                responses.append(aggregator.finish())
                return responses, True
    responses.append(aggregator.finish())
    return responses, False


def assert_replay_matches_expected(
    responses: list[LlmResponse],
    expected: dict[str, Any],
    *,
    usage: Callable[[Any], UsageMetadata | None],
    finish_reason: FinishReason | None,
    error_code: str | None = None,
) -> LlmResponse:
    """Check a replayed stream against its ``.expected.json``; return its final.

    The responses must follow the stream contract; the final's text, thought text, function calls
    (in index order; an expected ``id`` of ``null`` means an ``adk-`` id the aggregator generated), raw
    finish reason (``custom_metadata``), usage and error code must match, and as many partials
    as recorded must carry text.

    Args:
        responses: the partials and the final of one replay.
        expected: the transcript's reference aggregate.
        usage: the provider's documented usage mapping, written out in the test, applied to ``expected["usage"]``.
        finish_reason: the :class:`~rxllm.FinishReason` the final must carry.
        error_code: the final's ``error_code`` (``None``: no error, and no error message either).
    """
    final = assert_stream_protocol(responses)
    assert final.text() == expected["text"]
    assert (final.thought_text() or None) == expected["thinking"]
    assert sum(1 for r in responses[:-1] if r.text()) == expected["chunks_with_text"]

    calls = final.function_calls()
    want = sorted(expected["tool_calls"], key=lambda c: c["index"])
    assert [(c.name, c.args) for c in calls] == [(w["name"], w["arguments"]) for w in want]
    for call, wanted in zip(calls, want, strict=True):
        if wanted["id"] is None:
            assert call.id is not None and call.id.startswith("adk-")
        else:
            assert call.id == wanted["id"]

    raw_finish = expected["finish_reason"]
    assert final.custom_metadata == ({"finish_reason": raw_finish} if raw_finish is not None else None)
    assert final.finish_reason == finish_reason
    assert final.usage_metadata == usage(expected["usage"])
    assert final.error_code == error_code
    if error_code is None:
        assert final.error_message is None
    return final
