"""``rxllm live``: a live session through ``Runner.run_live``, against the embedded stub (a real
process, text on stdin) and against a test's own loopback stub (what the server received)."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import wave
from pathlib import Path

import pytest

from rxllm.cli._live import run_live
from rxllm.cli._style import Style
from rxllm.testing import Expect, LiveStubServer, Reply, gemini

from .terminal import KEY_VARIABLES

TIMEOUT = 60.0  # a safety net; nothing in a passing run waits for it


def write_wav(path: Path, samples: int, rate: int = 16000, channels: int = 1) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(i.to_bytes(2, "little", signed=True) for i in range(samples * channels)))


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    return subprocess.run([sys.executable, "-m", "rxllm", "live", *args], input=stdin, capture_output=True,
                          text=True, env=env, timeout=TIMEOUT, check=False)


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_each_line_is_a_turn_answered_with_text_and_transcript_from_the_embedded_stub(provider: str) -> None:
    done = cli("--provider", provider, stdin="Where is order A17?\n\nAnd B2?\n")
    assert done.returncode == 0, done.stderr
    answer = "Order A17 shipped on Tuesday."
    assert done.stdout.splitlines() == [answer, f"transcript: {answer}"] * 2  # the blank line sent nothing
    assert f"embedded {provider} stub" in done.stderr


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_audio_in_streams_the_wav_file_and_prints_what_was_heard(provider: str, tmp_path: Path) -> None:
    wav = tmp_path / "question.wav"
    write_wav(wav, samples=1600)  # 100 ms: five 20 ms frames
    done = cli("--provider", provider, "--audio-in", str(wav))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "heard: Where is order A17?"


def test_audio_in_sends_20_ms_frames_in_order_then_closes_the_socket(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    wav = tmp_path / "question.wav"
    write_wav(wav, samples=1650)  # five whole frames of 320 samples and a last of 50
    monkeypatch.setenv("RXLLM_TEST_LIVE_KEY", "AIza-test-key")
    script = [Expect("setup"), Reply(gemini.setup_complete()), Expect("realtimeInput"),
              Reply(gemini.text("Heard you.")), Reply(gemini.turn_complete())]
    out, err = io.StringIO(), io.StringIO()
    with LiveStubServer("gemini", [script]) as server:
        code = run_live(provider="gemini", model=None, base_url=server.url, api_key_env="RXLLM_TEST_LIVE_KEY",
                        audio_in=str(wav), stdin=io.StringIO(), out=out, err=err, style=Style(False))
        record = server.connection(0)
        assert record.wait_closed()
    assert code == 0, err.getvalue()
    assert out.getvalue() == "Heard you.\n"
    frames = [m["realtimeInput"]["audio"] for m in record.messages if "realtimeInput" in m]
    assert {f["mimeType"] for f in frames} == {"audio/pcm;rate=16000"}

    data = [base64.b64decode(f["data"]) for f in frames]
    assert [len(d) for d in data] == [640] * 5 + [100]
    with wave.open(str(wav), "rb") as source:
        assert b"".join(data) == source.readframes(source.getnframes())  # nothing lost or reordered
    assert record.headers["x-goog-api-key"] == "AIza-test-key" and record.query == {}
    assert record.close_code == 1000


def test_a_stereo_or_missing_wav_file_is_refused_before_connecting(tmp_path: Path) -> None:
    stereo = tmp_path / "stereo.wav"
    write_wav(stereo, samples=320, channels=2)
    refused = cli("--provider", "gemini", "--audio-in", str(stereo))
    assert refused.returncode == 2 and "16-bit mono PCM" in refused.stderr and "stub" not in refused.stderr
    missing = cli("--provider", "openai", "--audio-in", str(tmp_path / "none.wav"))
    assert missing.returncode == 2 and "cannot stream" in missing.stderr


def test_a_failing_session_exits_1_with_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RXLLM_TEST_LIVE_KEY", "AIza-test-key")
    script = [Expect("setup"), Reply(gemini.setup_complete()), Expect("clientContent"), Reply("not json")]
    out, err = io.StringIO(), io.StringIO()
    with LiveStubServer("gemini", [script]) as server:
        code = run_live(provider="gemini", model=None, base_url=server.url, api_key_env="RXLLM_TEST_LIVE_KEY",
                        audio_in=None, stdin=io.StringIO("Hi\n"), out=out, err=err, style=Style(False))
        assert server.connection(0).wait_closed()
    assert code == 1 and "ProtocolError" in err.getvalue()
    assert "AIza-test-key" not in err.getvalue()
