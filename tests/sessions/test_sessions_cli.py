"""``rxllm chat --session URL`` resumes a conversation across runs; ``rxllm sessions list|show|delete``."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import rxllm
from rxllm.cli import main
from rxllm.cli._chat import run_chat
from rxllm.cli._style import Style
from rxllm.testing import StubResponse, StubServer, sse_turn

from .conftest import reset_postgres

ROOT = Path(rxllm.__file__).resolve().parent.parent


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'chat.db'}"  # an absolute path: sqlite:////tmp/...
    else:
        dsn = request.getfixturevalue("pg_dsn")
        reset_postgres(dsn)
        yield dsn


def chat_once(server_url: str, store: str, lines: list[str], session_id: str = "default") -> str:
    out = io.StringIO()
    feed = iter(lines)

    def read_line(prompt: str) -> str:
        out.write(prompt)
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    code = run_chat(provider="openai", model="m", base_url=f"{server_url}/v1", out=out, err=out, style=Style(False),
                    read_line=read_line, session_store=store, session_id=session_id, user_id="ada")
    assert code == 0, out.getvalue()
    return out.getvalue()


def answer(*pieces: str) -> StubResponse:
    return StubResponse(body=sse_turn("openai-chat", text=list(pieces)))


def test_chat_with_a_session_store_resumes_the_conversation_in_a_new_run(store_url: str) -> None:
    with StubServer([answer("Hi ", "Ada."), answer("You said hello.")]) as server:
        first = chat_once(server.url, store_url, ["hello, I am Ada"])
        assert "new session 'default'" in first and "m › Hi Ada." in first
        second = chat_once(server.url, store_url, ["what did I say?"])
        assert "resumed session 'default': 2 messages" in second
        resumed_request = server.requests[1].body.decode()
    assert "hello, I am Ada" in resumed_request and "Hi Ada." in resumed_request


def test_sessions_list_show_delete_through_the_entry_point(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with StubServer([answer("Noted.")]) as server:
        chat_once(server.url, store_url, ["remember tea"], session_id="tea")
    assert main(["sessions", "list", "--store", store_url, "--user", "ada"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("tea\t")
    assert main(["sessions", "show", "tea", "--store", store_url, "--user", "ada"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "2 events" in shown[0]
    assert shown[1].endswith("user: remember tea") and shown[2].endswith("m: Noted.")
    assert main(["sessions", "delete", "tea", "--store", store_url, "--user", "ada"]) == 0
    assert "deleted session 'tea'" in capsys.readouterr().out
    assert main(["sessions", "show", "tea", "--store", store_url, "--user", "ada"]) == 1
    assert "no session 'tea'" in capsys.readouterr().err
    assert main(["sessions", "list", "--store", store_url, "--user", "ada"]) == 0
    assert "no sessions" in capsys.readouterr().out


def test_sessions_command_as_a_subprocess(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run([sys.executable, "-m", "rxllm", "sessions", "list", "--store", store, "--user", "u"],
                            capture_output=True, text=True, env=env, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    assert "no sessions for user 'u' of app 'rxllm-chat'" in listed.stdout
    bad = subprocess.run([sys.executable, "-m", "rxllm", "sessions", "list", "--store", "mysql://x"],
                         capture_output=True, text=True, env=env, timeout=60, check=False)
    assert bad.returncode == 2 and "sqlite:///" in bad.stderr
    which = subprocess.run([sys.executable, "-m", "rxllm", "sessions", "show", "--store", store],
                           capture_output=True, text=True, env=env, timeout=60, check=False)
    assert which.returncode == 2 and "which session?" in which.stderr


def test_a_bad_store_url_stops_the_chat_with_exit_2() -> None:
    out = io.StringIO()
    code = run_chat(provider="openai", model="m", base_url="http://127.0.0.1:9/v1", out=out, err=out,
                    style=Style(False), read_line=lambda _: "", session_store="redis://nope")
    assert code == 2 and "cannot use the session store" in out.getvalue()
