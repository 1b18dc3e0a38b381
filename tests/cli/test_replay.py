"""``rxllm replay``: recorded transcripts through the real parser and aggregator, with the contract's verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import Transcript, by_name

from rxllm import Content, LlmResponse, Part
from rxllm.cli import _replay as replay_module
from rxllm.cli import main
from rxllm.testing import parser_for, replay_sse

SHOWN = [
    "openai/chat-text-usage",
    "openai/chat-parallel-tool-calls",
    "openai-compatible/ollama-qwen2.5-coder-text-cjk",
    "anthropic/thinking-then-text",
    "gemini/function-call",
    "openai-responses/function-call",
]


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["replay", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", SHOWN)
def test_replay_prints_partials_final_and_verdict(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    transcript = by_name(name)
    responses = replay_sse(transcript.raw, parser_for(transcript.protocol))
    code, out, err = replay(capsys, str(transcript.sse_path), "--protocol", transcript.protocol)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[-1] == "contract: OK"
    partials = responses[:-1]
    assert lines[0] == f"partials ({len(partials)})"
    assert lines[1 + len(partials)] == "final"
    assert all(line.lstrip().startswith(f"{n}. ") for n, line in enumerate(lines[1 : 1 + len(partials)], 1))
    final = lines[lines.index("final") + 1 : -1]
    expected = transcript.expected
    if expected["text"]:
        assert f"  text:          {expected['text']!r}" in final
    if expected["thinking"]:
        assert f"  thought:       {expected['thinking']!r}" in final
    calls = [line for line in final if line.startswith("  tool call:")]
    assert [c.split()[2].split("(")[0] for c in calls] == [t["name"] for t in expected["tool_calls"]]
    for line, call in zip(calls, expected["tool_calls"], strict=True):
        assert json.dumps(call["arguments"], ensure_ascii=False) in line
    assert any(line.startswith("  finish reason: ") for line in final)
    if expected["usage"]:
        assert any(line.startswith("  usage:") and " tokens" in line for line in final)


def test_replay_shows_the_groq_error_final(capsys: pytest.CaptureFixture[str]) -> None:
    transcript = by_name("openai-compatible/groq-gpt-oss-error-event")
    code, out, _ = replay(capsys, str(transcript.sse_path), "--protocol", "openai-chat")
    assert code == 0  # the provider reported an error in-band: the stream itself is well-formed
    errors = [line for line in out.splitlines() if line.startswith("  error:")]
    assert len(errors) == 1 and "tool_use_failed: Tool call validation failed" in errors[0]
    assert out.splitlines()[-1] == "contract: OK"


def test_truncated_capture_exits_1_with_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    transcript = by_name("anthropic/text-short")
    path = tmp_path / "cut.sse"
    path.write_bytes(transcript.raw[: len(transcript.raw) // 2])
    code, out, _ = replay(capsys, str(path), "--protocol", "anthropic")
    assert code == 1
    assert out.splitlines() == [
        "contract: BROKEN — malformed stream: the recorded body ends before the provider said the turn was complete"
    ]


def test_malformed_json_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.sse"
    path.write_bytes(b'data: {"choices": [\n\n')
    code, out, _ = replay(capsys, str(path), "--protocol", "openai-chat")
    assert code == 1 and out.startswith("contract: BROKEN — malformed stream: ")


def test_a_contract_violation_is_reported(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def spliced(data: bytes, parser: object) -> list[LlmResponse]:  # a final holding only the last delta
        text = Content(role="model", parts=(Part.from_text("Hi"),))
        last = Content(role="model", parts=(Part.from_text("!"),))
        return [LlmResponse(content=text, partial=True), LlmResponse(content=last, partial=True),
                LlmResponse(content=last)]

    monkeypatch.setattr(replay_module, "replay_sse", spliced)
    code, out, _ = replay(capsys, str(by_name("openai/chat-text-usage").sse_path), "--protocol", "openai-chat")
    assert code == 1
    assert out.splitlines()[-1].startswith("contract: BROKEN — the partials' text does not concatenate")


@pytest.mark.parametrize("name", ["gemini/thinking-thought-parts", "openai-compatible/groq-gpt-oss-error-event"])
def test_json_output_round_trips(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    transcript: Transcript = by_name(name)
    code, out, err = replay(capsys, str(transcript.sse_path), "--protocol", transcript.protocol, "--json")
    assert code == 0 and err == "contract: OK\n"
    parsed = json.loads(out)
    assert "errorCode" in parsed or "finishReason" in parsed  # genai's camelCase names
    expected = replay_sse(transcript.raw, parser_for(transcript.protocol))[-1]
    assert LlmResponse.model_validate(parsed) == expected


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = replay(capsys, str(tmp_path / "nope.sse"), "--protocol", "gemini")
    assert code == 2 and "cannot read" in err and "nope.sse" in err


def test_unknown_protocol_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "x.sse", "--protocol", "nope"])
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_piped_replay_is_plain_text_and_exit_codes_reach_the_shell(tmp_path: Path) -> None:
    transcript = by_name("anthropic/thinking-then-text")
    ok = subprocess.run([sys.executable, "-m", "rxllm", "replay", str(transcript.sse_path), "--protocol", "anthropic"],
                        capture_output=True, text=True, timeout=30, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "\x1b" not in ok.stdout and ok.stdout.endswith("contract: OK\n")
    cut = tmp_path / "cut.sse"
    cut.write_bytes(transcript.raw[:200])
    broken = subprocess.run([sys.executable, "-m", "rxllm", "replay", str(cut), "--protocol", "anthropic"],
                            capture_output=True, text=True, timeout=30, check=False)
    assert broken.returncode == 1 and "contract: BROKEN" in broken.stdout
