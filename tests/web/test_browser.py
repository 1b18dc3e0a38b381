"""rxllm's dev UI in a real browser: headless Chromium drives the page served by ``rxllm.web``.

One browser for the module. The page talks to a real uvicorn server on 127.0.0.1 whose app runs
against a loopback stub model; the tab-close test checks on the stub server that the model's
connection was closed by rxllm.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rxllm.testing import StubServer
from rxllm.web import create_app

from .browser import Browser, Tab, chromium_path
from .support import MODEL_URL_ENV, LiveServer, OrderModel, serving, write_agents_dir

pytest.importorskip("websockets", reason="the browser tests drive Chromium over CDP with websockets")
if chromium_path() is None:
    pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    driver = Browser()
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture
def hold() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch, hold: threading.Event) -> Iterator[StubServer]:
    with StubServer(responder=OrderModel(hold=hold, hold_when="story", answer_words=300)) as stub:
        monkeypatch.setenv(MODEL_URL_ENV, stub.url)
        yield stub


@pytest.fixture
def server(tmp_path: Path, model: StubServer) -> Iterator[LiveServer]:
    with serving(create_app(write_agents_dir(tmp_path))) as live:
        yield live


def send(tab: Tab, text: str) -> None:
    tab.eval(f"document.getElementById('prompt').value = {json.dumps(text)}; "
             "document.getElementById('send').click(); true")


def chat_lines(tab: Tab) -> list[str]:
    lines: list[str] = tab.eval("[...document.querySelectorAll('#messages > *')].map(n => n.className + ': ' + "
                                "n.textContent)")
    return lines


def test_chat_streams_the_answer_and_the_tool_call_and_a_reload_shows_the_stored_history(
    browser: Browser, server: LiveServer
) -> None:
    tab = browser.open(f"{server.url}/dev-ui/#app=order&user=u1")
    try:
        tab.wait("document.body.dataset.ready === 'true'")
        assert tab.eval("document.getElementById('app').value") == "order"
        send(tab, "Where is order A17?")
        tab.wait("[...document.querySelectorAll('.msg.model')].some(n => "
                 "n.textContent.includes('It shipped Tuesday.'))")
        tab.wait("document.getElementById('status').textContent === 'idle'")
        lines = chat_lines(tab)
        assert lines[0] == "msg user: Where is order A17?"
        assert 'tool tool-call: \u2192 get_order({"order_id":"A17"})' in lines
        assert any(line.startswith("tool tool-response") and "shipped Tuesday" in line for line in lines)
        assert lines[-1] == "msg model: supportIt shipped Tuesday."
        events_panel = tab.eval("document.getElementById('events').textContent")
        assert "partial" in events_panel and "call get_order" in events_panel
        state = tab.wait("document.getElementById('state').textContent.includes('last_order') && "
                         "document.getElementById('state').textContent")
        assert json.loads(state) == {"last_order": "A17"}
        session_id = tab.eval("document.getElementById('session').value")
        assert session_id and f"session={session_id}" in tab.eval("location.hash")

        tab.reload()
        tab.wait("document.body.dataset.ready === 'true' && document.querySelectorAll('#messages > *').length >= 4")
        assert tab.eval("document.getElementById('session').value") == session_id
        assert chat_lines(tab) == lines  # the stored history renders as the streamed turn did
    finally:
        tab.close()


def test_the_ui_shows_an_app_that_failed_to_load(browser: Browser, server: LiveServer) -> None:
    tab = browser.open(f"{server.url}/dev-ui/#app=broken&user=u1")
    try:
        tab.wait("document.body.dataset.ready === 'true'")
        error = tab.wait("!document.getElementById('app-error').hidden && "
                         "document.getElementById('app-error').textContent")
        assert "no_such_module_anywhere" in error
    finally:
        tab.close()


def test_closing_the_tab_mid_stream_closes_the_model_connection(
    browser: Browser, server: LiveServer, model: StubServer
) -> None:
    tab = browser.open(f"{server.url}/dev-ui/#app=order&user=u1")
    closed = False
    try:
        tab.wait("document.body.dataset.ready === 'true'")
        send(tab, "Tell me a story about order A17")
        tab.wait("[...document.querySelectorAll('.msg.model')].some(n => n.textContent.includes('word0'))")
        assert tab.eval("document.getElementById('status').textContent") == "streaming"
        assert model.wait_for_requests(2, 10.0)
        answer = next(c for c in model.connections if c.id == model.requests[1].connection_id)
        assert answer.closed_at is None  # the model is still answering (held)
        tab.close()
        closed = True
        assert answer.wait_closed_by_client(15.0), "the model's connection stayed open after the tab closed"
    finally:
        if not closed:
            tab.close()
