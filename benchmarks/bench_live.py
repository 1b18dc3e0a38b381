"""Live sessions: frames per second one connection sends and receives, against a raw-WebSocket floor.

Run: ``.venv/bin/python benchmarks/bench_live.py`` (``--frames 2000 --reps 3 --window 64``).

Against the loopback Gemini Live stub (``rxllm.testing.LiveStubServer``, ``echo=True``: every
realtime audio frame comes back as one audio delta), each contender sends ``--frames`` 20 ms
frames of 16 kHz PCM (640 bytes) with at most ``--window`` unanswered, and counts the echoes:

* ``raw WebSocket`` (the floor): rxllm's own ``connect_websocket`` with hand-written JSON frames,
  no decoding of the echoes beyond counting them;
* ``rxllm live``: ``GeminiModel.connect`` → ``send_realtime(Blob)`` and ``receive()``, every echo
  decoded and aggregated into an ``LlmResponse`` (a partial with an inline-data part).

The table shows frames per second (round trips: one frame out, its echo in) and the ratio to the
floor, the median of ``--reps`` runs.

Then **close on dispose**, ``--close-reps`` times, interleaved: a session that delivered its first
text delta is disposed (``receive()``'s subscription), and the figure is the time from
``dispose()`` to the moment the *stub server* observed the client's close
(``LiveConnectionRecord.closed_at``); the floor is rxllm's raw ``WebSocketConnection.close()`` at
the same point of the same script. p50, p99 and the worst, and each against the floor's
(target: p99 under 5 ms). The server runs in this process: its thread's wake-up is in the figure.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import threading
import time

import httpx2

from rxllm import Blob, Content, LlmRequest, Part
from rxllm._transports.websocket import connect_websocket
from rxllm.providers.gemini import GeminiModel
from rxllm.testing import Expect, LiveStubServer, Reply, gemini

FRAME = b"\x01\x02" * 320
SETUP = [Expect("setup"), Reply(gemini.setup_complete())]


class _Window:
    def __init__(self, size: int, total: int) -> None:
        self._room = threading.Semaphore(size)
        self.received = 0
        self._total = total
        self.done = threading.Event()

    def take(self) -> None:
        self._room.acquire()

    def echo(self) -> None:
        self.received += 1
        self._room.release()
        if self.received == self._total:
            self.done.set()


def raw(server: LiveStubServer, frames: int, window: int) -> float:
    flow = _Window(window, frames)
    setup = threading.Event()

    class Sink:
        def on_message(self, message: str | bytes) -> None:
            if not setup.is_set():
                setup.set()
                return
            json.loads(message)
            flow.echo()

        def on_closed(self, code: int, reason: str) -> None: ...

        def on_error(self, error: Exception) -> None:
            raise error

    with httpx2.Client() as client:
        socket = connect_websocket(client, server.url + "/ws")
        socket.start(Sink())
        socket.send_text(json.dumps({"setup": {"model": "models/bench"}}))
        setup.wait(10)
        frame = json.dumps({"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000",
                                                         "data": base64.b64encode(FRAME).decode()}}})
        start = time.perf_counter()
        for _ in range(frames):
            flow.take()
            socket.send_text(frame)
        flow.done.wait(60)
        elapsed = time.perf_counter() - start
        socket.close()
    return frames / elapsed


def live(server: LiveStubServer, frames: int, window: int) -> float:
    flow = _Window(window, frames)
    connection = GeminiModel("bench", base_url=server.url, api_key="bench-key").connect(LlmRequest())
    subscription = connection.receive().subscribe(lambda _: flow.echo())
    blob = Blob(mime_type="audio/pcm;rate=16000", data=FRAME)
    start = time.perf_counter()
    for _ in range(frames):
        flow.take()
        connection.send_realtime(blob)
    flow.done.wait(60)
    elapsed = time.perf_counter() - start
    subscription.dispose()
    return frames / elapsed


HELD = [*SETUP, Expect("clientContent"), Reply(gemini.text("hello"))]  # then the stub reads until the close
HELLO = Content(role="user", parts=[Part.from_text("hi")])


def close_raw(server: LiveStubServer, index: int, client: httpx2.Client) -> float:
    got = threading.Semaphore(0)

    class Sink:
        def on_message(self, message: str | bytes) -> None:
            got.release()

        def on_closed(self, code: int, reason: str) -> None: ...

        def on_error(self, error: Exception) -> None: ...

    socket = connect_websocket(client, server.url + "/ws")
    socket.start(Sink())
    socket.send_text(json.dumps({"setup": {"model": "models/bench"}}))
    if not got.acquire(timeout=10):
        raise RuntimeError("no setupComplete")
    socket.send_text(json.dumps({"clientContent": {"turns": [], "turnComplete": True}}))
    if not got.acquire(timeout=10):
        raise RuntimeError("no text delta")
    record = server.connection(index)
    disposed_at = time.monotonic()
    socket.close()
    if not record.wait_closed(5):
        raise RuntimeError("the server never saw the close")
    return (record.closed_at or 0.0) - disposed_at


def close_live(server: LiveStubServer, index: int, model: GeminiModel) -> float:
    first = threading.Event()
    connection = model.connect(LlmRequest())
    subscription = connection.receive().subscribe(lambda _: first.set())
    connection.send_content(HELLO)
    if not first.wait(10):
        raise RuntimeError("no text delta")
    record = server.connection(index)
    disposed_at = time.monotonic()
    subscription.dispose()
    if not record.wait_closed(5):
        raise RuntimeError("the server never saw the close")
    return (record.closed_at or 0.0) - disposed_at


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return (statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], ordered[-1])


def close_on_dispose(reps: int) -> None:
    times: dict[str, list[float]] = {"raw WebSocket close()": [], "rxllm live dispose()": []}
    with LiveStubServer("gemini", [HELD] * (2 * reps + 2)) as server, httpx2.Client() as client:
        model = GeminiModel("bench", base_url=server.url, api_key="bench-key")
        index = 0
        close_raw(server, index, client)  # warm-up
        close_live(server, index + 1, model)
        index += 2
        for _ in range(reps):
            times["raw WebSocket close()"].append(close_raw(server, index, client))
            times["rxllm live dispose()"].append(close_live(server, index + 1, model))
            index += 2
    floor = _percentiles(times["raw WebSocket close()"])
    print(f"\nclose on dispose: dispose() to the server seeing the close, {reps} interleaved reps, ms")
    print(f"{'contender':<24}{'p50':>8}{'p99':>8}{'worst':>8}{'p50 vs':>9}{'p99 vs':>9}")
    for name, values in times.items():
        p50, p99, worst = _percentiles(values)
        print(f"{name:<24}{p50 * 1e3:>8.3f}{p99 * 1e3:>8.3f}{worst * 1e3:>8.3f}"
              f"{p50 / floor[0]:>8.2f}x{p99 / floor[1]:>8.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--close-reps", type=int, default=200, help="close-on-dispose reps (0: skip)")
    args = parser.parse_args()
    results: dict[str, list[float]] = {"raw WebSocket": [], "rxllm live": []}
    for _ in range(args.reps):
        for name, run in (("raw WebSocket", raw), ("rxllm live", live)):
            with LiveStubServer("gemini", [SETUP] * 2, echo=True) as server:
                results[name].append(run(server, args.frames, args.window))
    floor = statistics.median(results["raw WebSocket"])
    print(f"{args.frames} frames of {len(FRAME)} bytes, window {args.window}, median of {args.reps}")
    print(f"{'contender':<16} {'frames/s':>10} {'vs floor':>9}")
    for name, values in results.items():
        rate = statistics.median(values)
        print(f"{name:<16} {rate:>10,.0f} {rate / floor:>8.2f}x")
    if args.close_reps:
        close_on_dispose(args.close_reps)


if __name__ == "__main__":
    main()
