"""The server dies at random byte offsets: a correct final or ``on_error``, never a truncated final, never a hang.

For each provider (OpenAI chat, Anthropic, Gemini, through the ready-made models over a real
loopback socket, on both transports: a thread per stream and asyncio) one turn -- text with
2/3/4-byte UTF-8 characters, then a tool call whose JSON arguments stream in pieces -- is cut at
seeded-random offsets (plus every interesting one: inside a multi-byte character, inside the
arguments, around the finish and the end marker). Every cut is served four ways: TCP reset or
clean FIN, chunked or close-delimited body (with a close-delimited body a clean FIN looks like a
normal end of body to HTTP: only the provider's own finish tells a whole turn from a cut one).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
import reactivex
from faults_support import (
    MODES,
    REQUEST,
    TRANSPORT_KINDS,
    Recorder,
    Transport,
    cut_offsets,
    cut_response,
    end_marker_at,
    fault_body,
    final_signature,
    make_transport,
)
from wire import WIRES, Wire

from rxllm import LlmResponse, RetryPolicy, RxLlmError, TransportError
from rxllm.testing import Disconnect, StubResponse, StubServer, complete_json, parser_for, replay_sse

SEED = 0x5EED_C075


@pytest.fixture(params=WIRES, ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=TRANSPORT_KINDS)
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    transport = make_transport(request.param, streams=4)
    try:
        yield transport
    finally:
        transport.close()


def run(source: reactivex.Observable[LlmResponse]) -> Recorder:
    recorder = Recorder()
    recorder.subscribe(source)
    return recorder


def test_the_fault_bodies_hold_what_the_cuts_need(wire: Wire) -> None:
    fb = fault_body(wire.protocol)
    final = replay_sse(fb.body, parser_for(wire.protocol))[-1]
    assert final.text() == "Grüße aus Köln — 日本語で 天気 🌦️ gleich."
    assert [(c.name, c.args) for c in final.function_calls()] == [
        ("get_weather", {"city": "Köln", "note": "naïve 🎉 日本", "days": [1, 2, {"deep": True}]})
    ]
    assert len(fb.utf8_inside) >= 20 and len(fb.args_inside) >= 40
    assert 0 < fb.finish_at <= fb.usage_at <= len(fb.body)
    # The independent offsets agree with the decoder: the shortest prefix that replays whole is finish_at.
    with pytest.raises(RxLlmError):
        replay_sse(fb.body[: fb.finish_at - 1], parser_for(wire.protocol))
    assert final_signature(replay_sse(fb.body[: fb.finish_at], parser_for(wire.protocol))[-1]) == final_signature(
        final
    )


def test_server_dies_at_random_offsets(wire: Wire, transport: Transport) -> None:
    fb = fault_body(wire.protocol)
    rng = random.Random(SEED + WIRES.index(wire))
    offsets = cut_offsets(fb, rng)
    marker = end_marker_at(fb)
    outcomes = {"final": 0, "error": 0}
    started = time.monotonic()
    with StubServer() as server:
        model = wire.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
        server.enqueue(StubResponse(body=fb.events))
        uncut = run(model.generate_content(REQUEST, stream=True))
        uncut.wait("the uncut stream")
        assert uncut.completed and not uncut.errors
        expected: LlmResponse = uncut.items[-1]
        assert final_signature(expected) == final_signature(replay_sse(fb.body, parser_for(wire.protocol))[-1])
        full_text = expected.text()

        for offset in offsets:
            for reset, chunked in MODES:
                where = f"{wire.name} cut at {offset}/{len(fb.body)} (reset={reset}, chunked={chunked}, seed={SEED})"
                server.enqueue(cut_response(fb, offset, reset=reset, chunked=chunked))
                recorder = run(model.generate_content(REQUEST, stream=True))
                recorder.wait(where)
                partials = [r for r in recorder.items if r.partial]
                finals = [r for r in recorder.items if not r.partial]
                assert full_text.startswith("".join(p.text() for p in partials)), f"{where}: partials not a prefix"
                assert all(not p.function_calls() for p in partials), where
                if recorder.completed:
                    outcomes["final"] += 1
                    assert offset >= fb.finish_at, f"{where}: a final from a stream cut before its finish"
                    assert len(finals) == 1 and recorder.items[-1] is finals[0], f"{where}: {recorder.items!r}"
                    assert final_signature(finals[0]) == final_signature(expected), f"{where}: truncated final"
                    if offset >= fb.usage_at:
                        assert finals[0].usage_metadata == expected.usage_metadata, where
                else:
                    outcomes["error"] += 1
                    assert finals == [], f"{where}: a final and then an error"
                    (error,) = recorder.errors
                    assert isinstance(error, TransportError), f"{where}: {type(error).__name__}: {error}"
                    # A clean FIN after the whole turn is not an error: the provider said it was done.
                    if not reset and not chunked:
                        assert offset < fb.finish_at, f"{where}: a complete turn ended in {error!r}"
                    if not reset and chunked and marker is not None:
                        assert offset < marker, f"{where}: the end marker arrived, yet {error!r}"
                    # Once the finish and usage were read, a cut loses nothing (a reset may discard
                    # bytes the client had not read yet, so only a clean FIN is certain).
                    if not reset:
                        assert offset < fb.usage_at, f"{where}: the finish and usage arrived, yet {error!r}"
    elapsed = time.monotonic() - started
    cuts = len(offsets) * len(MODES)
    assert outcomes["final"] + outcomes["error"] == cuts
    assert outcomes["error"] > cuts // 2 and outcomes["final"] > 0, outcomes
    print(f"\n{wire.name} over {transport!r}: {cuts} cuts ({len(offsets)} offsets x {len(MODES)} modes) "
          f"in {elapsed:.2f}s: {outcomes}")


def test_non_streamed_answer_cut_at_random_offsets(wire: Wire, transport: Transport) -> None:
    """``stream=False``: a cut body is ``on_error`` (a close-delimited one fails to parse), never a final."""
    import json

    body = json.dumps(complete_json(wire.protocol, "Grüße aus Köln — 日本語 🌦️"), ensure_ascii=False).encode()
    rng = random.Random(SEED ^ WIRES.index(wire))
    offsets = sorted({0, len(body) - 1, *rng.sample(range(1, len(body)), 10)})
    with StubServer() as server:
        model = wire.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
        for offset in offsets:
            for reset, chunked in MODES:
                where = f"{wire.name} stream=False cut at {offset}/{len(body)} (reset={reset}, chunked={chunked})"
                server.enqueue(StubResponse(body=[body[:offset], Disconnect(reset=reset)], chunked=chunked,
                                            headers={"content-type": "application/json"}))
                recorder = run(model.generate_content(REQUEST, stream=False))
                recorder.wait(where)
                assert recorder.items == [], f"{where}: {recorder.items!r}"
                (error,) = recorder.errors
                assert isinstance(error, RxLlmError), f"{where}: {type(error).__name__}: {error}"
