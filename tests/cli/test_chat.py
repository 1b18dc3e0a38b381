"""``rxllm chat``: through a real pseudo-terminal against the stub server, and in-process for the error paths."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from rxllm.cli import main
from rxllm.cli._chat import PROMPT, THINKING, run_chat
from rxllm.cli._style import Style
from rxllm.testing import Hold, StubResponse, StubServer, sse_turn

from .terminal import KEY_VARIABLES, Terminal


def _openai_turn(*pieces: str) -> StubResponse:
    return StubResponse(body=sse_turn("openai-chat", text=list(pieces)))


def test_chat_streams_cancels_on_ctrl_c_and_keeps_only_whole_exchanges(terminals: list[Terminal]) -> None:
    release = threading.Event()
    held = sse_turn("openai-chat", text=["Half ", "an ", "answer ", "that ", "never ", "ends."])
    with StubServer([
        _openai_turn("Hello", " there", "!"),
        StubResponse(body=[*held[:4], Hold(release), *held[4:]]),
        _openai_turn("Third", " answer."),
    ]) as server:
        term = Terminal("chat", "--provider", "openai", "--model", "m", "--base-url", f"{server.url}/v1",
                        "--system", "Be brief.")
        terminals.append(term)
        term.expect(PROMPT)
        term.type("first question\n")
        assert "Hello there!" in term.expect(PROMPT)

        term.type("second question\n")
        term.expect("Half an answer ")  # streamed while the server holds the rest of the answer
        term.type("\x03")  # Ctrl-C: the line discipline sends SIGINT to the chat
        after_cancel = term.expect(PROMPT)
        assert "[cancelled]" in after_cancel and "never" not in after_cancel
        second = server.requests[1]
        connection = next(c for c in server.connections if c.id == second.connection_id)
        assert connection.wait_closed_by_client(2), "cancelling the answer did not close its connection"

        term.type("third question\n")
        assert "Third answer." in term.expect(PROMPT)
        assert server.wait_for_requests(3, 5)
        assert server.requests[2].json()["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "Hello there!"},
            {"role": "user", "content": "third question"},
        ]
        assert "Half" not in server.requests[2].body.decode()

        term.type("/exit\n")
        assert term.proc.wait(10) == 0
        assert len(server.requests) == 3
        release.set()


def test_ctrl_c_at_the_prompt_exits_0(terminals: list[Terminal]) -> None:
    with StubServer() as server:
        term = Terminal("chat", "--provider", "openai", "--model", "m", "--base-url", f"{server.url}/v1")
        terminals.append(term)
        term.expect(PROMPT)
        term.wait_until_reading()
        term.type("\x03")
        assert term.proc.wait(10) == 0
        assert server.requests == []


def test_piped_chat_is_plain_text_and_ends_at_eof() -> None:
    with StubServer([_openai_turn("Plain", " text.")]) as server:
        env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
        result = subprocess.run(
            [sys.executable, "-m", "rxllm", "chat", "--provider", "openai", "--model", "m",
             "--base-url", f"{server.url}/v1"],
            input="hello\n", capture_output=True, text=True, env=env, timeout=30, check=False,
        )
    assert result.returncode == 0, result.stderr
    assert f"{PROMPT}m › Plain text.\n" in result.stdout
    assert "\x1b" not in result.stdout and result.stderr == ""
    assert THINKING not in result.stdout  # the indicator is for terminals only


@pytest.mark.parametrize(
    ("provider", "variable"),
    [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY"), ("gemini", "GEMINI_API_KEY or GOOGLE_API_KEY")],
)
def test_missing_key_exits_2_naming_the_variable(
    provider: str, variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert main(["chat", "--provider", provider, "--model", "m"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and f"set {variable}" in lines[0] and "Traceback" not in captured.err


class _Session:
    """``run_chat`` in-process with scripted input; records the prompts it was shown."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = iter(lines)
        self.out = io.StringIO()
        self.prompts = 0

    def read_line(self, prompt: str) -> str:
        self.out.write(prompt)
        self.prompts += 1
        try:
            return next(self._lines)
        except StopIteration:
            raise EOFError from None

    def run(self, **kwargs: Any) -> int:
        return run_chat(provider="openai", model="m", out=self.out, err=self.out, style=Style(False),
                        read_line=self.read_line, **kwargs)


def test_unreachable_server_prints_one_line_and_returns_to_the_prompt() -> None:
    with StubServer() as gone:
        url = f"{gone.url}/v1"
    session = _Session(["hello", "/exit"])
    assert session.run(base_url=url) == 0
    assert session.prompts == 2
    errors = [line for line in session.out.getvalue().splitlines() if "error:" in line]
    assert len(errors) == 1 and "could not reach the server" in errors[0] and "Connection refused" in errors[0]
    assert "Traceback" not in session.out.getvalue()


def test_http_error_shows_status_and_provider_message_then_the_chat_goes_on() -> None:
    unauthorized = StubResponse.json(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}})
    with StubServer([unauthorized, _openai_turn("Fine", " now.")]) as server:
        session = _Session(["first", "second"])
        assert session.run(base_url=f"{server.url}/v1") == 0
        lines = session.out.getvalue().splitlines()
        assert any("HTTP 401: Incorrect API key provided" in line and "OPENAI_API_KEY" in line for line in lines)
        assert f"{PROMPT}m › Fine now." in lines
        # the failed exchange is not part of the conversation
        assert server.requests[1].json()["messages"] == [{"role": "user", "content": "second"}]


def test_in_band_provider_error_is_shown_and_the_exchange_dropped() -> None:
    error_event = (b'event: error\ndata: {"error":{"message":"Tool call validation failed",'
                   b'"type":"invalid_request_error","code":"tool_use_failed"}}\n\n')
    broken = StubResponse(body=[*sse_turn("openai-chat", text=["Par", "tial"])[:3], error_event])
    with StubServer([broken, _openai_turn("Whole.")]) as server:
        session = _Session(["one", "two", "three"])
        server.enqueue(_openai_turn("Again."))
        assert session.run(base_url=f"{server.url}/v1") == 0
        lines = session.out.getvalue().splitlines()
        assert f"{PROMPT}m › Partial" in lines
        assert any(line.startswith("error: ") and "tool_use_failed" in line for line in lines)
        assert [m["content"] for m in server.requests[2].json()["messages"]] == ["two", "Whole.", "three"]


@pytest.mark.parametrize(("provider", "protocol"), [("anthropic", "anthropic"), ("gemini", "gemini")])
def test_other_providers_keep_the_conversation(provider: str, protocol: str) -> None:
    turns = [StubResponse(body=sse_turn(protocol, text=pieces)) for pieces in (["Bonjour", " !"], ["Oui."])]
    with StubServer(turns) as server:
        session = _Session(["salut", "encore ?"])
        code = run_chat(provider=provider, model="m", base_url=server.url, system="Sois bref.", out=session.out,
                        err=session.out, style=Style(False), read_line=session.read_line)
        assert code == 0
        assert [f"{PROMPT}m › Bonjour !", f"{PROMPT}m › Oui."] == session.out.getvalue().splitlines()[2:4]
        second = server.requests[1].body.decode()
        assert all(text in second for text in ("salut", "Bonjour !", "encore ?", "Sois bref."))
