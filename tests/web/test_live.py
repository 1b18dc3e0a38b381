"""ADK's ``/run_live`` WebSocket over ``Runner.run_live``: a real WebSocket client (``websockets``)
against uvicorn on 127.0.0.1, the app's model a scripted live session (``ScriptedLlm(live=...)``).

The client sends ``LiveRequest`` JSON and reads ``Event`` JSON, as ADK's dev UI does; the close of
the model's connection when the client goes away is observed by the app's own model (a latch).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rxllm.web import create_app

from .support import LiveServer, serving

ws_client = pytest.importorskip("websockets.sync.client", reason="a real WebSocket client")
from websockets.exceptions import ConnectionClosed  # noqa: E402

LIVE_APP = textwrap.dedent('''
    import threading

    from reactivex import operators as ops

    from rxllm import Content, LlmResponse, Part
    from rxllm.agents import LlmAgent
    from rxllm.testing import ScriptedLlm

    closed = threading.Event()  # set when the model's live connection ends (receive() disposed or closed)


    def text(value, partial=True):
        return LlmResponse(content=Content(role="model", parts=(Part.from_text(value),)), partial=partial)


    class ObservedLlm(ScriptedLlm):
        def connect(self, llm_request):
            connection = super().connect(llm_request)
            receive = connection.receive
            connection.receive = lambda: receive().pipe(ops.finally_action(closed.set))
            return connection


    script = [text("It shipped"), text(" Tuesday."),
              LlmResponse(content=Content(role="model", parts=(Part.from_text("It shipped Tuesday."),)),
                          turn_complete=True)]
    model = ObservedLlm([], live=[script, script])
    root_agent = LlmAgent("voice", model, description="a live agent")
''')

QUESTION = {"content": {"role": "user", "parts": [{"text": "Where is order A17?"}]}}


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[LiveServer, Any]]:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "voice.py").write_text(LIVE_APP)
    app = create_app(agents, web=False)
    with serving(app) as server:
        httpx.post(f"{server.url}/apps/voice/users/u1/sessions/s1", timeout=30).raise_for_status()
        yield server, app.state.rxllm.loader.load("voice").root_agent.model


def live_url(server: LiveServer, session_id: str = "s1", **extra: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"app_name": "voice", "user_id": "u1", "session_id": session_id,
                                               **extra}.items())
    return f"ws://127.0.0.1:{server.port}/run_live?{query}"


def test_run_live_takes_live_requests_and_streams_events_then_closes_on_the_close_request(
    live: tuple[LiveServer, Any],
) -> None:
    server, model = live
    with ws_client.connect(live_url(server, modalities="TEXT"), open_timeout=30) as ws:
        ws.send(json.dumps(QUESTION))
        events: list[dict[str, Any]] = []
        while not (events and events[-1].get("turnComplete")):
            events.append(json.loads(ws.recv(timeout=30)))
        ws.send(json.dumps({"close": True}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    assert [e["content"]["parts"][0]["text"] for e in events] == ["It shipped", " Tuesday.", "It shipped Tuesday."]
    assert [e.get("partial") for e in events] == [True, True, None]
    assert all(e["author"] == "voice" and e["invocationId"] for e in events)  # ADK's camelCase Event JSON
    connection = model.connections[0]
    assert connection.request.live_connect_config.response_modalities == ("TEXT",)
    sent = [s for s in connection.sent if s.kind == "content"]
    assert [s.value.parts[0].text for s in sent] == ["Where is order A17?"]
    assert connection.closed
    # the turn is stored; the partials are not
    session = httpx.get(f"{server.url}/apps/voice/users/u1/sessions/s1", timeout=30).json()
    assert [e["content"]["parts"][0]["text"] for e in session["events"] if e.get("content")] == [
        "It shipped Tuesday."]


def test_a_client_that_goes_away_disposes_the_live_run_and_closes_the_model_connection(
    live: tuple[LiveServer, Any],
) -> None:
    server, model = live
    module_closed = __import__("sys").modules[type(model).__module__].closed
    with ws_client.connect(live_url(server), open_timeout=30) as ws:
        ws.send(json.dumps(QUESTION))
        assert json.loads(ws.recv(timeout=30))["partial"] is True
        assert not module_closed.is_set()
    assert module_closed.wait(30)  # observed by the model: its receive() ended
    assert model.connections[0].closed
    # the server keeps serving: a second live session on it works
    with ws_client.connect(live_url(server), open_timeout=30) as ws:
        ws.send(json.dumps(QUESTION))
        assert json.loads(ws.recv(timeout=30))["content"]["parts"][0]["text"] == "It shipped"


@pytest.mark.parametrize(("url_extra", "frame", "code"), [
    ({"session_id": "no-such-session"}, None, 1002),  # ADK: accepted, then closed with 1002
    ({}, "not json", 1007),
    ({}, json.dumps({"content": QUESTION["content"], "close": True}), 1007),  # two requests in one
])
def test_run_live_bad_input_closes_the_socket_with_a_code_and_reason(
    live: tuple[LiveServer, Any], url_extra: dict[str, str], frame: str | None, code: int,
) -> None:
    server, _ = live
    session_id = url_extra.get("session_id", "s1")
    with ws_client.connect(live_url(server, session_id=session_id), open_timeout=30) as ws:
        if frame is not None:
            ws.send(frame)
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == code and closed.value.rcvd.reason
