"""``rxllm chat`` as a user sees it on a terminal: the thinking indicator, the local ``/commands``,
a resumed session's last turns, and ``rxllm --version``.

Each test drives ``python -m rxllm`` through a real pseudo-terminal and checks the screen the
output leaves (``render``: backspaces and carriage returns applied, styling removed), not just
the bytes written.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from pathlib import Path

import rxllm
from rxllm.cli._chat import PROMPT, THINKING, run_chat
from rxllm.cli._style import Style
from rxllm.testing import Hold, StubResponse, StubServer, sse_turn

from .terminal import Terminal


def _turn(*pieces: str) -> StubResponse:
    return StubResponse(body=sse_turn("openai-chat", text=list(pieces)))


def _chat(server: StubServer, *extra: str) -> Terminal:
    return Terminal("chat", "--provider", "openai", "--model", "m", "--base-url", f"{server.url}/v1", *extra)


def test_thinking_shows_until_the_first_token_then_gives_way_to_the_answer(terminals: list[Terminal]) -> None:
    release = threading.Event()
    with StubServer([StubResponse(body=[Hold(release), *sse_turn("openai-chat", text=["Hi", "."])])]) as server:
        term = _chat(server)
        terminals.append(term)
        term.expect(PROMPT)
        term.type("hello\n")
        term.expect(THINKING)  # the server holds the whole answer back: nothing else can be on screen
        assert term.screen()[-1] == f"m › {THINKING}"
        release.set()
        screen = term.expect_end(PROMPT)
        # the answer is shorter than the indicator: a leftover "king…" would show if it were not erased
        assert screen[-2:] == ["m › Hi.", PROMPT.rstrip()]
        assert not any(THINKING in line for line in screen)


def test_thinking_is_erased_with_its_label_when_the_answer_fails(terminals: list[Terminal]) -> None:
    unauthorized = StubResponse.json(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}})
    with StubServer([unauthorized]) as server:
        term = _chat(server)
        terminals.append(term)
        term.expect(PROMPT)
        term.type("hello\n")
        screen = term.expect_end(PROMPT)
        assert screen[-2].startswith("error: the server answered HTTP 401: Incorrect API key provided")
        assert screen[-3] == f"{PROMPT}hello"  # no stray "m › " between the question and the error
        assert THINKING in term.text()  # it was written, then erased with its label


def test_commands_are_answered_locally_and_never_sent_to_the_model(terminals: list[Terminal]) -> None:
    with StubServer([_turn("Paris."), _turn("A path.")]) as server:
        term = _chat(server)
        terminals.append(term)
        term.expect(PROMPT)
        term.type("/help\n")
        help_lines = term.expect_end(PROMPT)
        for command in ("/help", "/history", "/clear", "/exit"):
            assert any(line.startswith(command + " ") for line in help_lines), help_lines

        term.type("/weather in Paris\n")
        assert term.expect_end(PROMPT)[-2].startswith("unknown command /weather: /help lists the commands")

        term.type("/history\n")
        assert term.expect_end(PROMPT)[-2] == "(no conversation yet)"
        assert server.requests == []  # nothing so far reached the model

        term.type("capital of France?\n")
        term.expect_end(PROMPT)
        term.type("/history\n")
        assert term.expect_end(PROMPT)[-3:-1] == ["you › capital of France?", "m › Paris."]

        term.type("/clear\n")
        assert term.expect_end(PROMPT)[-2] == "cleared 2 messages from the conversation."
        term.type("//etc/hosts is what?\n")  # // sends a line that starts with /
        term.expect_end(PROMPT)
        assert server.wait_for_requests(2, 5)
        assert server.requests[1].json()["messages"] == [{"role": "user", "content": "/etc/hosts is what?"}]

        term.type("/exit\n")
        assert term.proc.wait(10) == 0
        assert len(server.requests) == 2


def _chat_in_process(server: StubServer, store: str, lines: list[str]) -> None:
    feed = iter(lines)

    def read_line(prompt: str) -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    out = io.StringIO()
    code = run_chat(provider="openai", model="m", base_url=f"{server.url}/v1", out=out, err=out, style=Style(False),
                    read_line=read_line, session_store=store, user_id="ada")
    assert code == 0, out.getvalue()


def test_a_resumed_session_shows_its_last_turns(terminals: list[Terminal], tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    answers = [_turn(f"answer {n}.") for n in range(1, 5)]
    with StubServer([*answers, _turn("Still here.")]) as server:
        _chat_in_process(server, store, [f"question {n}" for n in range(1, 5)])
        term = _chat(server, "--session", store, "--user", "ada")
        terminals.append(term)
        screen = term.expect_end(PROMPT)
        start = screen.index("resumed session 'default': 8 messages (kept in the session store).")
        assert screen[start + 1 : start + 9] == [
            "… 2 earlier messages (/history shows them all)",
            "you › question 2", "m › answer 2.",
            "you › question 3", "m › answer 3.",
            "you › question 4", "m › answer 4.",
            PROMPT.rstrip(),
        ]
        term.type("/history\n")
        assert term.expect_end(PROMPT)[-9:-1] == [
            line for n in range(1, 5) for line in (f"you › question {n}", f"m › answer {n}.")
        ]
        term.type("/clear\n")
        assert term.expect_end(PROMPT)[-2] == "cleared 8 messages from the conversation and from the session store."
        term.type("/exit\n")
        assert term.proc.wait(10) == 0
        # the next run finds the session empty: the clear reached the store
        again = _chat(server, "--session", store, "--user", "ada")
        terminals.append(again)
        assert "resumed session 'default': 0 messages (kept in the session store)." in again.expect_end(PROMPT)


def test_version_prints_the_package_version() -> None:
    result = subprocess.run([sys.executable, "-m", "rxllm", "--version"], capture_output=True, text=True,
                            timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"rxllm {rxllm.__version__}\n"
