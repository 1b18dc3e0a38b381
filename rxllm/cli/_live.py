"""``rxllm live``: a live (BIDI) session through ``Runner.run_live``: text in, text and transcript out.

By default it talks to an embedded loopback stub (:class:`rxllm.testing.LiveStubServer`) that
plays a scripted session of the chosen protocol, so it runs with no key and no network;
``--base-url`` points it at a real endpoint instead (the key from ``--api-key-env``).

Each line read from stdin is one user turn (``LiveRequestQueue.content``); the model's text is
printed as it streams, a finished transcription on its own line (``transcript: ...`` for the
model's speech, ``heard: ...`` for the user's). End of input closes the session.
``--audio-in FILE.wav`` streams a 16-bit PCM WAV file as real-time input in 20 ms frames, paced
as a microphone would send them, and ends after the model's turn.
"""

from __future__ import annotations

import os
import threading
import time
import wave
from collections.abc import Iterator
from contextlib import ExitStack
from typing import TextIO

from .._core.errors import RxLlmError
from .._core.types import Blob, Content, Part
from .._models.base_llm import BaseLlm
from ..agents import Event, InMemoryRunner, LiveRequestQueue, LlmAgent, RunConfig
from ..providers.gemini import GeminiModel
from ..providers.openai import OpenAiRealtimeModel
from ..testing import Expect, LiveStep, LiveStubServer, Reply, gemini, openai
from ._style import Style

__all__ = ["LIVE_PROVIDERS", "run_live"]

LIVE_PROVIDERS = ("gemini", "openai")
"""The protocols ``rxllm live --provider`` speaks."""

DEFAULT_MODELS = {"gemini": "gemini-live-2.5-flash", "openai": "gpt-realtime"}
FRAME_SECONDS = 0.02
STUB_TURNS = 64  # text turns the embedded stub answers
STUB_ANSWER = "Order A17 shipped on Tuesday."
STUB_HEARD = "Where is order A17?"
_TURN_TIMEOUT = 120.0  # a safety net for one turn of a real endpoint


def _stub_script(provider: str, audio: bool) -> list[LiveStep]:
    """The embedded stub's session: each user turn (or the first audio frame) gets one answer."""
    if provider == "gemini":
        opening: list[LiveStep] = [Expect("setup"), Reply(gemini.setup_complete())]
        turn: list[LiveStep] = [Reply(gemini.text(STUB_ANSWER)), Reply(gemini.output_transcription(STUB_ANSWER)),
                                Reply(gemini.turn_complete(9, 7))]
        if audio:
            return [*opening, Expect("realtimeInput"), Reply(gemini.input_transcription(STUB_HEARD)), *turn]
        return [*opening, *[step for _ in range(STUB_TURNS) for step in (Expect("clientContent"), *turn)]]
    opening = [Reply(openai.session_created()), Expect("session.update")]
    turn = [Reply(openai.text(STUB_ANSWER)), Reply(openai.output_transcript(STUB_ANSWER)),
            Reply(openai.output_transcript_done(STUB_ANSWER)), Reply(openai.response_done(input_tokens=9,
                                                                                          output_tokens=7))]
    if audio:
        return [*opening, Expect("input_audio_buffer.append"), Reply(openai.input_transcript_done(STUB_HEARD)),
                *turn]
    return [*opening, *[step for _ in range(STUB_TURNS) for step in (Expect("response.create"), *turn)]]


def _model(provider: str, model: str, base_url: str, api_key: str | None) -> BaseLlm:
    if provider == "gemini":
        return GeminiModel(model, base_url=base_url, api_key=api_key)
    return OpenAiRealtimeModel(model, base_url=base_url, api_key=api_key)


def _wav_frames(path: str) -> tuple[int, Iterator[bytes]]:
    """The WAV file's sample rate and its 20 ms frames (16-bit PCM, mono or the first channel's bytes as they are)."""
    reader = wave.open(path, "rb")  # noqa: SIM115 (closed by the generator)
    if reader.getsampwidth() != 2 or reader.getnchannels() != 1:
        reader.close()
        raise ValueError(f"{path}: rxllm live streams 16-bit mono PCM; this file has "
                         f"{reader.getsampwidth() * 8}-bit samples and {reader.getnchannels()} channel(s)")
    rate = reader.getframerate()
    per_frame = max(1, round(rate * FRAME_SECONDS))

    def frames() -> Iterator[bytes]:
        with reader:
            while chunk := reader.readframes(per_frame):
                yield chunk

    return rate, frames()


class _Printer:
    """Writes the run's events: text deltas as they come, finished transcriptions on their own lines."""

    def __init__(self, out: TextIO, style: Style) -> None:
        self._out = out
        self._style = style
        self._open_line = False
        self.turns = threading.Semaphore(0)
        self.done = threading.Event()
        self.error: Exception | None = None

    def _line(self, text: str) -> None:
        if self._open_line:
            self._out.write("\n")
            self._open_line = False
        self._out.write(text + "\n")

    def on_next(self, event: Event) -> None:
        if event.input_transcription is not None and event.input_transcription.finished:
            self._line(self._style.dim(f"heard: {event.input_transcription.text}"))
        if event.partial and event.text():
            self._out.write(event.text())
            self._open_line = True
        if event.output_transcription is not None and event.output_transcription.finished:
            self._line(self._style.dim(f"transcript: {event.output_transcription.text}"))
        if event.interrupted:
            self._line(self._style.dim("(interrupted)"))
        if event.turn_complete:
            if self._open_line:
                self._out.write("\n")
                self._open_line = False
            self._out.flush()
            self.turns.release()
        else:
            self._out.flush()

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()
        self.turns.release()

    def on_completed(self) -> None:
        self.done.set()
        self.turns.release()


def run_live(*, provider: str, model: str | None, base_url: str | None, api_key_env: str | None,
             audio_in: str | None, stdin: TextIO, out: TextIO, err: TextIO, style: Style) -> int:
    """Run one live session; returns the exit code (0 done, 1 the session failed, 2 bad input)."""
    frames: Iterator[bytes] | None = None
    rate = 0
    if audio_in is not None:
        try:
            rate, frames = _wav_frames(audio_in)
        except (OSError, EOFError, ValueError, wave.Error) as exc:
            err.write(f"rxllm live: cannot stream {audio_in}: {exc}\n")
            return 2
    api_key: str | None = None
    if base_url is not None and api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            err.write(f"rxllm live: {api_key_env} is not set\n")
            return 2
    with ExitStack() as stack:
        if base_url is None:
            server = stack.enter_context(LiveStubServer(provider, [_stub_script(provider, frames is not None)]))  # type: ignore[arg-type]
            base_url, api_key = server.url, "stub-key"
            err.write(style.dim(f"rxllm live: talking to the embedded {provider} stub at {server.url}") + "\n")
        try:
            llm = _model(provider, model or DEFAULT_MODELS[provider], base_url, api_key)
        except RxLlmError as exc:
            err.write(f"rxllm live: {exc}\n")
            return 2
        runner = InMemoryRunner(LlmAgent("live", llm, instruction="You answer briefly."), app_name="rxllm-live")
        runner.session_service.create_session("rxllm-live", "cli", session_id="live").run()
        queue = LiveRequestQueue()
        printer = _Printer(out, style)
        config = RunConfig(response_modalities=("TEXT",), input_audio_transcription={},
                           output_audio_transcription={})
        subscription = runner.run_live(user_id="cli", session_id="live", live_request_queue=queue,
                                       run_config=config).subscribe(printer.on_next, printer.on_error,
                                                                    printer.on_completed)
        try:
            if frames is not None:
                _stream_audio(queue, frames, rate, provider, printer)
                printer.turns.acquire(timeout=_TURN_TIMEOUT)
            else:
                for line in stdin:
                    text = line.strip()
                    if not text:
                        continue
                    queue.content(Content(role="user", parts=(Part.from_text(text),)))
                    printer.turns.acquire(timeout=_TURN_TIMEOUT)
                    if printer.done.is_set():
                        break
            queue.close()
            printer.done.wait(_TURN_TIMEOUT)
        except KeyboardInterrupt:
            subscription.dispose()
            return 130
        finally:
            subscription.dispose()
    if printer.error is not None:
        err.write(f"rxllm live: {type(printer.error).__name__}: {printer.error}\n")
        return 1
    return 0


def _stream_audio(queue: LiveRequestQueue, frames: Iterator[bytes], rate: int, provider: str,
                  printer: _Printer) -> None:
    """Put the frames on the queue at a microphone's pace (one per 20 ms); OpenAI then commits the buffer."""
    mime_type = f"audio/pcm;rate={rate}"
    start = time.monotonic()
    for number, frame in enumerate(frames):
        if printer.done.is_set():
            return
        due = start + number * FRAME_SECONDS
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # pacing real-time input, not synchronisation
        queue.realtime(Blob(data=frame, mime_type=mime_type))
    if provider == "openai":
        queue.realtime(Blob(data=b"", mime_type=mime_type))  # input_audio_buffer.commit
