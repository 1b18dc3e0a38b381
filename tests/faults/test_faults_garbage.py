"""Garbage input: the SSE decoder and every provider's parser raise only rxllm's own errors, never hang.

Hypothesis feeds random bytes and mutated recorded transcripts (byte flips, truncations,
duplicated, dropped and swapped events, JSON values replaced by values of another JSON type)
through :func:`rxllm.testing.replay_sse` -- the very loop a live stream runs: decoder, parser,
aggregator, final -- split into random reads, and the non-streamed bodies through each parser's
``parse_response``. The only exception allowed out is an :class:`rxllm.RxLlmError`. Inputs are
bounded in size and every example runs under a SIGALRM watchdog, so a hang fails instead of
stalling the suite. A handful of mutated bodies also go through the real models over a loopback
socket, to show the Rx wiring adds no foreign exception of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import re
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder, make_transport
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transcripts import by_protocol
from wire import WIRES

from rxllm import LineTooLongError, RetryPolicy, RxLlmError, SseDecoder, SseEvent
from rxllm.testing import PROTOCOLS, StubResponse, StubServer, complete_json, parser_for, replay_sse, sse_turn

EXAMPLES = int(os.environ.get("RXLLM_FUZZ_EXAMPLES", "300"))
"""Examples per fuzz test (raise it locally for a deeper run: ``RXLLM_FUZZ_EXAMPLES=5000``)."""

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # CI runs the same examples every time; raise EXAMPLES to explore further
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
EXAMPLE_SECONDS = 5
PROTOCOL_NAMES = sorted(PROTOCOLS)
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class Hang(BaseException):
    """Raised by the watchdog in the main thread (a BaseException, so no ``except Exception`` eats it)."""


@contextlib.contextmanager
def watchdog(seconds: int = EXAMPLE_SECONDS) -> Iterator[None]:
    """Fail (raise :class:`Hang`) if the block takes longer than ``seconds``."""

    def alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no result within {seconds}s: a hang on garbage input")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def only_rxllm_errors(run: Any, *args: Any) -> str:
    """Run ``run(*args)`` under the watchdog; return ``"ok"`` or the RxLlmError's type; anything else fails."""
    with watchdog():
        try:
            run(*args)
        except RxLlmError as exc:
            return type(exc).__name__
        except Exception as exc:  # the finding: a foreign exception escaped
            raise AssertionError(f"a foreign exception escaped: {type(exc).__name__}: {exc}") from exc
    return "ok"


def pieces_of(data: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(c for c in set(cuts) if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points)]


# --- the SSE decoder -----------------------------------------------------------------------------------------------

_ATOMS = st.sampled_from([
    b"data:", b"data: ", b"event: ", b"id: ", b"retry: 5", b":", b"x", b"{", b"}", b"[DONE]", b"\xc3\xa9",
    b"\xf0\x9f", b"\x8c", b"\xff", b"\x00", b"\r", b"\n", b"\r\n", b"\n\n", b"\xef\xbb\xbf",
])


@FUZZ
@given(
    stream=st.one_of(st.binary(max_size=4096), st.lists(_ATOMS, max_size=200).map(b"".join)),
    data=st.data(),
)
def test_the_sse_decoder_on_garbage_raises_only_line_too_long(stream: bytes, data: st.DataObject) -> None:
    cap = data.draw(st.sampled_from([8, 64, 1024, 8 * 1024 * 1024]), label="max_line_bytes")
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20), label="cuts")
    decoder = SseDecoder(max_line_bytes=cap)

    def run() -> None:
        for piece in pieces_of(stream, cuts):
            for event in decoder.feed(piece):
                assert isinstance(event, SseEvent) and isinstance(event.data, str)

    outcome = only_rxllm_errors(run)
    assert outcome in ("ok", "LineTooLongError"), outcome
    if outcome == "LineTooLongError":
        assert any(len(line) > cap for line in re.split(rb"\r\n|\r|\n", stream)), "a line under the cap was refused"


def test_the_line_cap_is_the_only_decoder_error() -> None:
    with pytest.raises(LineTooLongError):
        SseDecoder(max_line_bytes=8).feed(b"data: 0123456789")


# --- every parser, random bytes --------------------------------------------------------------------------------------


def replay(protocol: str, pieces: list[bytes]) -> None:
    replay_sse(pieces, parser_for(protocol))


@FUZZ
@given(
    protocol=st.sampled_from(PROTOCOL_NAMES),
    stream=st.one_of(
        st.binary(max_size=2048),
        st.lists(st.one_of(_ATOMS, st.binary(max_size=40)), max_size=100).map(b"".join),
    ),
    data=st.data(),
)
def test_every_parser_on_random_bytes_raises_only_rxllm_errors(
    protocol: str, stream: bytes, data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10), label="cuts")
    only_rxllm_errors(replay, protocol, pieces_of(stream, cuts))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(protocol=st.sampled_from(PROTOCOL_NAMES), payload=json_values, kind=st.sampled_from(["message", "error", "x"]))
def test_every_parser_on_random_json_events_raises_only_rxllm_errors(protocol: str, payload: Any, kind: str) -> None:
    event = f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()
    only_rxllm_errors(replay, protocol, [event])


# --- every parser, mutated transcripts -------------------------------------------------------------------------------

_TRANSCRIPTS = {protocol: by_protocol(protocol) for protocol in PROTOCOL_NAMES}
_MAX_BODY = 6000  # bytes of a transcript to mutate: keeps every example small and fast


def split_events(raw: bytes) -> list[bytes]:
    """A body's events, each with its terminating blank line (the last may lack one)."""
    events: list[bytes] = []
    start = 0
    for match in _EVENT_END.finditer(raw):
        events.append(raw[start : match.end()])
        start = match.end()
    if start < len(raw):
        events.append(raw[start:])
    return events


_SWAP_VALUES: list[Any] = [None, True, False, 0, -1, 7, 2**64, 1.5, "", "x", "STOP", [], [1, "a"], {}, {"a": {}}]


def swap_json_value(event: bytes, rng: random.Random) -> bytes:
    """Replace one value somewhere in the event's JSON data by a value of another JSON type."""
    text = event.decode("utf-8", "replace")
    match = re.search(r"^data: ?(.*)$", text, re.MULTILINE)
    if match is None:
        return event
    try:
        payload = json.loads(match.group(1))
    except ValueError:
        return event
    nodes: list[tuple[Any, Any]] = []  # (container, key) pairs

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            nodes.append((node, key))
            walk(value)

    walk(payload)
    if not nodes:
        payload = rng.choice(_SWAP_VALUES)
    else:
        container, key = rng.choice(nodes)
        old = container[key]
        choices = [v for v in _SWAP_VALUES if type(v) is not type(old)]
        container[key] = rng.choice(choices)
    line = "data: " + json.dumps(payload, ensure_ascii=False)
    return (text[: match.start()] + line + text[match.end() :]).encode("utf-8")


MUTATIONS = ("flip", "truncate", "duplicate", "drop", "reorder", "swap_json", "swap_json", "swap_json")


def mutate(raw: bytes, rng: random.Random, count: int) -> tuple[bytes, list[str]]:
    """Apply ``count`` random mutations; return the body and what was done (for the failure message)."""
    events = split_events(raw[:_MAX_BODY] if len(raw) > _MAX_BODY else raw)
    done: list[str] = []
    for _ in range(count):
        kind = rng.choice(MUTATIONS)
        if not events:
            break
        i = rng.randrange(len(events))
        if kind == "flip":
            event = bytearray(events[i])
            at = rng.randrange(len(event))
            event[at] ^= rng.randrange(1, 256)
            events[i] = bytes(event)
        elif kind == "truncate":
            events[i] = events[i][: rng.randrange(len(events[i]) + 1)]
            events = events[: i + 1]
        elif kind == "duplicate":
            events.insert(rng.randrange(len(events) + 1), events[i])
        elif kind == "drop":
            del events[i]
        elif kind == "reorder":
            j = rng.randrange(len(events))
            events[i], events[j] = events[j], events[i]
        else:
            events[i] = swap_json_value(events[i], rng)
        done.append(f"{kind}@{i}")
    return b"".join(events), done


def transcripts_and_scripted(protocol: str) -> list[tuple[str, bytes]]:
    """The recorded transcripts of a protocol, plus a scripted turn with a tool call where one exists."""
    bodies = [(t.name, t.raw) for t in _TRANSCRIPTS[protocol]]
    if protocol != "openai-responses":
        from faults_support import TEXT_PIECES, TOOL_CALL, utf8_events

        bodies.append(("scripted", b"".join(utf8_events(sse_turn(protocol, text=TEXT_PIECES, tool_calls=[TOOL_CALL])))))
    return bodies


@FUZZ
@given(
    protocol=st.sampled_from(PROTOCOL_NAMES),
    which=st.integers(0, 1000),
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 4),
    data=st.data(),
)
def test_every_parser_on_mutated_transcripts_raises_only_rxllm_errors(
    protocol: str, which: int, seed: int, count: int, data: st.DataObject
) -> None:
    bodies = transcripts_and_scripted(protocol)
    name, raw = bodies[which % len(bodies)]
    body, done = mutate(raw, random.Random(seed), count)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=6), label="cuts")
    try:
        only_rxllm_errors(replay, protocol, pieces_of(body, cuts))
    except AssertionError as exc:
        raise AssertionError(f"{protocol} {name} mutated {done} (seed {seed}): {exc}") from exc


def test_unmutated_transcripts_replay_cleanly() -> None:
    """The baseline the mutations start from replays without error (else the fuzz proves little)."""
    for protocol in PROTOCOL_NAMES:
        for name, raw in transcripts_and_scripted(protocol):
            if name.endswith("error-event"):
                continue
            assert only_rxllm_errors(replay, protocol, [raw]) == "ok", name


# --- every parser, a systematic sweep: each value of each event shape swapped for each JSON type, or removed -------

_TYPE_REPRESENTATIVES: list[Any] = [None, True, 7, 1.5, "x", [], {}]
_SWEEP_TRANSCRIPTS = {
    "openai-chat": ["openai/chat-parallel-tool-calls", "openai-compatible/deepseek-reasoner-reasoning-content",
                    "openai/chat-refusal"],
    "anthropic": ["anthropic/redacted-thinking", "anthropic/thinking-then-text"],
    "gemini": ["gemini/function-call-thought-signature", "gemini/thinking-thought-parts"],
    "openai-responses": ["openai-responses/function-call", "openai-responses/text"],
}


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(sorted({repr(_shape(v)) for v in value})))
    return type(value).__name__


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield (*path, key)
        yield from _paths(child, (*path, key))


def sweep_bodies(protocol: str) -> Iterator[tuple[str, bytes]]:
    """For each distinct event shape of the corpus: every value swapped for every other JSON type, or removed."""
    corpus = [(t.name, t.raw) for t in _TRANSCRIPTS[protocol] if t.name in _SWEEP_TRANSCRIPTS[protocol]]
    corpus += [(n, raw) for n, raw in transcripts_and_scripted(protocol) if n == "scripted"]
    seen: set[Any] = set()
    for name, raw in corpus:
        events = split_events(raw)
        for i, event in enumerate(events):
            text = event.decode("utf-8")
            match = re.search(r"^data: ?(.*)$", text, re.MULTILINE)
            if match is None:
                continue
            try:
                payload = json.loads(match.group(1))
            except ValueError:
                continue
            shape = (tuple(re.findall(r"^event: ?(.*)$", text, re.MULTILINE)), _shape(payload))
            if shape in seen:
                continue
            seen.add(shape)
            for path in _paths(payload):
                for value in [*_TYPE_REPRESENTATIVES, KeyError]:  # KeyError stands for "remove the key"
                    mutated = json.loads(match.group(1))
                    container = mutated
                    for key in path[:-1]:
                        container = container[key]
                    old = container[path[-1]]
                    if value is KeyError:
                        if not isinstance(container, dict):
                            continue
                        del container[path[-1]]
                    elif type(value) is type(old):
                        continue
                    else:
                        container[path[-1]] = value
                    line = "data: " + json.dumps(mutated, ensure_ascii=False)
                    new_event = (text[: match.start()] + line + text[match.end() :]).encode("utf-8")
                    change = "removed" if value is KeyError else f"-> {value!r}"
                    label = f"{name} event {i} {'/'.join(map(str, path))} {change}"
                    yield label, b"".join(events[:i]) + new_event + b"".join(events[i + 1 :])


@pytest.mark.parametrize("protocol", PROTOCOL_NAMES)
def test_every_parser_survives_a_type_swap_of_every_value(protocol: str) -> None:
    outcomes: dict[str, int] = {}
    for label, body in sweep_bodies(protocol):
        try:
            outcome = only_rxllm_errors(replay, protocol, [body])
        except AssertionError as exc:
            raise AssertionError(f"{protocol}: {label}: {exc}") from exc
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert sum(outcomes.values()) > 200 and outcomes.get("ProtocolError", 0) > 0, outcomes
    print(f"\n{protocol}: {sum(outcomes.values())} type swaps/removals: {outcomes}")


# --- parse_response: non-streamed bodies ------------------------------------------------------------------------------


def parse_whole(protocol: str, body: bytes) -> None:
    parser_for(protocol).parse_response(body)


_COMPLETE = {p: json.dumps(complete_json(p, "Grüße 🌦️")).encode() for p in ("openai-chat", "anthropic", "gemini")}


@FUZZ
@given(protocol=st.sampled_from(sorted(_COMPLETE)), seed=st.integers(0, 2**32 - 1), garbage=st.binary(max_size=300))
def test_every_non_streamed_parser_on_garbage_raises_only_rxllm_errors(
    protocol: str, seed: int, garbage: bytes
) -> None:
    rng = random.Random(seed)
    body = _COMPLETE[protocol]
    mutated = swap_json_value(b"data: " + body + b"\n\n", rng).removeprefix(b"data: ").removesuffix(b"\n\n")
    for candidate in (garbage, body[: rng.randrange(len(body))], mutated):
        only_rxllm_errors(parse_whole, protocol, candidate)


# --- a few mutated bodies through the real models -------------------------------------------------------------------


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
def test_mutated_bodies_through_the_live_model_fail_only_with_rxllm_errors(wire: Any, kind: str) -> None:
    rng = random.Random(0xBADF00D + WIRES.index(wire))
    bodies = transcripts_and_scripted(wire.protocol)
    outcomes: dict[str, int] = {}
    transport = make_transport(kind)
    with StubServer() as server:
        model = wire.model(server.url, retry_policy=RetryPolicy.never(), transport=transport)
        for n in range(40):
            name, raw = bodies[n % len(bodies)]
            body, done = mutate(raw, rng, rng.randint(1, 3))
            server.enqueue(StubResponse(body=pieces_of(body, rng.sample(range(len(body) + 1), min(3, len(body) + 1)))))
            recorder = Recorder()
            recorder.subscribe(model.generate_content(REQUEST, stream=True))
            recorder.wait(f"{name} mutated {done}", timeout=TIMEOUT)
            for error in recorder.errors:
                assert isinstance(error, RxLlmError), f"{name} mutated {done}: {type(error).__name__}: {error}"
            key = type(recorder.errors[0]).__name__ if recorder.errors else "final"
            outcomes[key] = outcomes.get(key, 0) + 1
            if recorder.completed:
                assert not recorder.items[-1].partial
    transport.close()
    print(f"\n{wire.name} over {kind}: 40 mutated live streams: {outcomes}")
