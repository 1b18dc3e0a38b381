"""ADK's development-server API over rxllm's runtime, against a real uvicorn server on 127.0.0.1
and a loopback stub model (``rxllm.testing.StubServer``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rxllm import Blob, Part
from rxllm.agents import InMemoryArtifactService
from rxllm.testing import StubServer
from rxllm.web import create_app

from .support import MODEL_URL_ENV, OrderModel, serving, write_agents_dir

QUESTION = {"role": "user", "parts": [{"text": "Where is order A17?"}]}


def sse_events(body: str) -> list[dict[str, Any]]:
    """The JSON of each ``data:`` frame of an SSE body (ADK's framing: one line per event)."""
    frames = [frame for frame in body.split("\n\n") if frame.strip()]
    assert all(frame.startswith("data: ") and "\n" not in frame for frame in frames), frames
    return [json.loads(frame[len("data: "):]) for frame in frames]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    with StubServer(responder=OrderModel()) as stub:
        monkeypatch.setenv(MODEL_URL_ENV, stub.url)
        yield stub


@pytest.fixture
def artifacts() -> InMemoryArtifactService:
    return InMemoryArtifactService()


@pytest.fixture
def api(tmp_path: Path, model: StubServer, artifacts: InMemoryArtifactService) -> Iterator[httpx.Client]:
    app = create_app(write_agents_dir(tmp_path), artifact_service=artifacts, trace=True)
    with serving(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def create_session(api: httpx.Client, app: str = "order", session_id: str = "s1", **state: Any) -> dict[str, Any]:
    response = api.post(f"/apps/{app}/users/u1/sessions/{session_id}", json=state or None)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_list_apps_lists_packages_and_modules_and_shows_load_errors(api: httpx.Client) -> None:
    assert api.get("/list-apps").json() == ["broken", "order", "raising"]
    detailed = {app["name"]: app for app in api.get("/list-apps", params={"detailed": "true"}).json()["apps"]}
    assert detailed["order"] == {"name": "order", "rootAgentName": "support", "description": "answers order questions",
                                 "language": "python", "isComputerUse": False}
    info = api.get("/apps/order/app-info").json()
    assert info["agents"]["support"]["subAgents"] == []
    declared = info["agents"]["support"]["tools"][0]["functionDeclarations"][0]
    assert declared["name"] == "get_order" and "order_id" in json.dumps(declared["parameters"])
    assert api.get("/apps/nope/app-info").status_code == 404
    error = detailed["broken"]["error"]
    assert "ModuleNotFoundError" in error and "no_such_module_anywhere" in error
    # a broken app answers with its load error, and the server keeps serving the others
    create_session(api, "broken")
    run = api.post("/run", json={"appName": "broken", "userId": "u1", "sessionId": "s1", "newMessage": QUESTION})
    assert run.status_code == 500 and "no_such_module_anywhere" in run.json()["detail"]
    assert api.get("/list-apps").status_code == 200


def test_sessions_create_get_list_delete_in_adk_camel_case(api: httpx.Client) -> None:
    created = create_session(api, cart="empty")
    assert created["id"] == "s1" and created["appName"] == "order" and created["userId"] == "u1"
    assert created["state"] == {"cart": "empty"} and created["events"] == []
    again = api.post("/apps/order/users/u1/sessions/s1")
    assert again.status_code == 400 and again.json() == {"detail": "Session already exists: s1"}
    fresh = api.post("/apps/order/users/u1/sessions", json={"state": {"k": 1}})
    assert fresh.status_code == 200 and fresh.json()["state"] == {"k": 1} and fresh.json()["id"] != "s1"
    listed = api.get("/apps/order/users/u1/sessions").json()
    assert sorted(s["id"] for s in listed) == sorted(["s1", fresh.json()["id"]])
    assert api.get("/apps/order/users/u1/sessions/s1").json()["state"] == {"cart": "empty"}
    patched = api.patch("/apps/order/users/u1/sessions/s1", json={"stateDelta": {"cart": "full", "n": 2}})
    assert patched.status_code == 200 and patched.json()["state"] == {"cart": "full", "n": 2}
    stored = api.get("/apps/order/users/u1/sessions/s1").json()
    assert stored["state"] == {"cart": "full", "n": 2}
    assert [(e["author"], e["actions"]["stateDelta"]) for e in stored["events"]] == [("user", {"cart": "full", "n": 2})]
    assert api.patch("/apps/order/users/u1/sessions/zz", json={"stateDelta": {}}).status_code == 404
    assert api.patch("/apps/order/users/u1/sessions/s1", json={}).status_code == 422
    assert api.delete("/apps/order/users/u1/sessions/s1").status_code == 200
    missing = api.get("/apps/order/users/u1/sessions/s1")
    assert missing.status_code == 404 and missing.json() == {"detail": "Session not found"}


def test_run_sse_streams_partials_tool_call_and_answer_then_history_is_stored(
    api: httpx.Client, model: StubServer
) -> None:
    create_session(api)
    request = {"appName": "order", "userId": "u1", "sessionId": "s1", "newMessage": QUESTION, "streaming": True,
               "stateDelta": {"channel": "web"}}
    with api.stream("POST", "/run_sse", json=request) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.read().decode())
    partial_text = "".join(p["text"] for e in events if e.get("partial") for p in e["content"]["parts"] if "text" in p)
    assert partial_text == "Let me check.It shipped Tuesday."
    final = [e for e in events if not e.get("partial")]
    calls = [p["functionCall"] for e in final for p in e["content"]["parts"] if "functionCall" in p]
    assert calls == [{"id": "call_1", "name": "get_order", "args": {"order_id": "A17"}}]
    results = [p["functionResponse"] for e in final for p in e["content"]["parts"] if "functionResponse" in p]
    assert results[0]["response"] == {"order_id": "A17", "status": "shipped Tuesday"}
    assert final[-1]["content"]["parts"][0]["text"] == "It shipped Tuesday."
    assert final[-1]["author"] == "support" and "invocationId" in final[-1] and "usageMetadata" in final[-1]
    assert len(model.requests) == 2
    session = api.get("/apps/order/users/u1/sessions/s1").json()
    assert session["state"] == {"channel": "web", "last_order": "A17"}
    texts = [p.get("text") for e in session["events"] for p in (e.get("content") or {}).get("parts", [])]
    assert texts[0] == "Where is order A17?" and texts[-1] == "It shipped Tuesday."
    assert not any(e.get("partial") for e in session["events"])
    # the session's trace: rxllm's own spans of the run
    spans = api.get("/debug/trace/session/s1").json()
    names = [s["name"] for s in spans]
    assert names[0] == "invoke_agent support" and names.count("chat gpt-4o-mini") == 2
    assert "execute_tool get_order" in names
    assert all(isinstance(s["span_id"], int) and s["logs"] == [] and s["end_time"] >= s["start_time"] for s in spans)
    # an event's trace (ADK's shape): the attributes of the span that produced it, with its ids
    answer = api.get(f"/debug/trace/{final[-1]['id']}").json()
    assert answer["gen_ai.operation.name"] == "chat" and answer["gen_ai.usage.output_tokens"] == 4
    assert answer["gcp.vertex.agent.event_id"] == final[-1]["id"]
    assert answer["gcp.vertex.agent.invocation_id"] == final[-1]["invocationId"]
    second_call = [s for s in spans if s["name"] == "chat gpt-4o-mini"][1]
    assert (answer["trace_id"], answer["span_id"]) == (second_call["trace_id"], second_call["span_id"])
    tool_event = next(e for e in final if any("functionResponse" in p for p in e["content"]["parts"]))
    tool = api.get(f"/dev/apps/order/debug/trace/{tool_event['id']}").json()
    assert tool["gen_ai.tool.name"] == "get_order" and tool["gen_ai.tool.call.id"] == "call_1"
    assert api.get("/debug/trace/no-such-event").status_code == 404
    # the session's spans name the events they produced, as ADK's do (its dev UI links them so)
    tagged = {s["attributes"].get("gcp.vertex.agent.event_id"): s["name"] for s in spans}
    assert tagged[final[-1]["id"]] == "chat gpt-4o-mini" and tagged[tool_event["id"]] == "execute_tool get_order"
    assert api.get("/dev/apps/order/debug/trace/session/s1").json() == spans


def test_run_without_streaming_answers_the_events_as_a_list(api: httpx.Client) -> None:
    create_session(api)
    response = api.post("/run", json={"appName": "order", "userId": "u1", "sessionId": "s1", "newMessage": QUESTION})
    assert response.status_code == 200
    events = response.json()
    assert not any(e.get("partial") for e in events)
    assert [e["author"] for e in events] == ["support", "support", "support"]
    assert events[-1]["content"]["parts"][0]["text"] == "It shipped Tuesday."


def test_artifacts_list_load_versions_delete(api: httpx.Client, artifacts: InMemoryArtifactService) -> None:
    create_session(api)
    artifacts.save_artifact("order", "u1", "s1", "report.txt", Part.from_text("v0")).run()
    artifacts.save_artifact("order", "u1", "s1", "report.txt", Part.from_text("v1")).run()
    artifacts.save_artifact("order", "u1", "s1", "img.png",
                            Part(inline_data=Blob(mime_type="image/png", data=b"\x89PNG"))).run()
    base = "/apps/order/users/u1/sessions/s1/artifacts"
    assert api.get(base).json() == ["img.png", "report.txt"]
    assert api.get(f"{base}/report.txt").json() == {"text": "v1"}
    assert api.get(f"{base}/report.txt", params={"version": 0}).json() == {"text": "v0"}
    assert api.get(f"{base}/report.txt/versions/0").json() == {"text": "v0"}
    assert api.get(f"{base}/report.txt/versions").json() == [0, 1]
    assert api.get(f"{base}/img.png").json()["inlineData"]["mimeType"] == "image/png"
    assert api.delete(f"{base}/report.txt").status_code == 200
    gone = api.get(f"{base}/report.txt")
    assert gone.status_code == 404 and gone.json() == {"detail": "Artifact not found"}


def test_unknown_app_and_malformed_requests(api: httpx.Client) -> None:
    unknown = api.get("/apps/nope/users/u1/sessions")
    assert unknown.status_code == 404 and unknown.json() == {"detail": "App not found: nope"}
    create_session(api)
    no_session = api.post("/run_sse", json={"appName": "order", "userId": "u1", "sessionId": "zz",
                                            "newMessage": QUESTION})
    assert no_session.status_code == 404 and no_session.json() == {"detail": "Session not found"}
    malformed = api.post("/run_sse", json={"appName": "order", "userId": "u1", "sessionId": "s1"})
    assert malformed.status_code == 422
    assert [e["loc"] for e in malformed.json()["detail"]] == [["body", "newMessage"]]
    bad_part = api.post("/run", json={"appName": "order", "userId": "u1", "sessionId": "s1",
                                      "newMessage": {"role": "user", "parts": [{"txet": "typo"}]}})
    assert bad_part.status_code == 422 and "txet" in json.dumps(bad_part.json()["detail"])


@pytest.mark.parametrize("path", [
    "/apps/..%2F..%2Fetc/users/u1/sessions",
    "/apps/order/users/..%2F..%2Froot/sessions",
    "/apps/order/users/../sessions",
    "/apps/order/users/u1/sessions/..",
    "/apps/order/users/u1/sessions/s1/artifacts/%2E%2E",
    "/apps/order/users/%2E%2E/sessions",
    "/apps/%2E%2E/users/u1/sessions",
    "/apps/order/users/u1/sessions/s1/artifacts/..%2Fsecret",
    "/apps/order.agent/users/u1/sessions",
])
def test_path_traversal_is_refused(api: httpx.Client, path: str) -> None:
    create_session(api)
    response = api.get(path)
    assert response.status_code in (400, 404), response.text
    assert response.status_code != 200


def test_traversal_in_ids_is_a_400_with_the_reason(api: httpx.Client) -> None:
    response = api.get("/apps/order/users/%2E%2E/sessions")  # the client keeps it: the server sees ".."
    assert response.status_code == 400 and "invalid id" in response.json()["detail"]
    create_session(api)
    artifact = api.get("/apps/order/users/u1/sessions/s1/artifacts/..%5Csecret")
    assert artifact.status_code == 400 and "not a plain file name" in artifact.json()["detail"]


def test_an_agent_that_raises_ends_the_stream_with_an_error_event_and_the_server_keeps_serving(
    api: httpx.Client,
) -> None:
    create_session(api, "raising")
    request = {"appName": "raising", "userId": "u1", "sessionId": "s1", "newMessage": QUESTION, "streaming": True}
    response = api.post("/run_sse", json=request)
    assert response.status_code == 200
    events = sse_events(response.text)
    assert len(events) == 1 and "the agent exploded" in events[0]["error"]
    create_session(api)
    ok = api.post("/run", json={"appName": "order", "userId": "u1", "sessionId": "s1", "newMessage": QUESTION})
    assert ok.status_code == 200 and ok.json()[-1]["content"]["parts"][0]["text"] == "It shipped Tuesday."


def test_client_disconnect_disposes_the_run_and_closes_the_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = threading.Event()
    with StubServer(responder=OrderModel(hold=hold, answer_words=200)) as stub:
        monkeypatch.setenv(MODEL_URL_ENV, stub.url)
        app = create_app(write_agents_dir(tmp_path))
        try:
            with serving(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
                create_session(client)
                request = {"appName": "order", "userId": "u1", "sessionId": "s1", "newMessage": QUESTION,
                           "streaming": True}
                seen: list[dict[str, Any]] = []
                with client.stream("POST", "/run_sse", json=request) as response:
                    for line in response.iter_lines():
                        if line.startswith("data: "):
                            seen.append(json.loads(line[len("data: "):]))
                            if any("word" in p.get("text", "") for p in seen[-1].get("content", {}).get("parts", [])):
                                break  # the answer is streaming: hang up
                assert stub.wait_for_requests(2, 10.0)
                answer_connection = stub.requests[1].connection_id  # the held answer's connection
                upstream = next(c for c in stub.connections if c.id == answer_connection)
                assert upstream.wait_closed_by_client(10.0), "the model's connection stayed open"
                # the next run on the session starts: the disposed run left the session's queue
                hold.set()
                after = client.get("/apps/order/users/u1/sessions/s1").json()
                assert [e["author"] for e in after["events"]] == ["user", "support", "support"]
        finally:
            hold.set()


def test_reload_picks_up_a_changed_app(tmp_path: Path, model: StubServer) -> None:
    agents = write_agents_dir(tmp_path)
    app = create_app(agents, reload=True)
    with serving(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        def description() -> str:
            apps = client.get("/list-apps", params={"detailed": "true"}).json()["apps"]
            return next(a for a in apps if a["name"] == "order")["description"]

        assert description() == "answers order questions"
        source = agents / "order" / "agent.py"
        source.write_text(source.read_text().replace("answers order questions", "answers anything"))
        stat = source.stat()
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert description() == "answers anything"


def test_import_rxllm_imports_nothing_of_fastapi() -> None:
    code = "import sys, rxllm, rxllm.agents, rxllm.cli, rxllm.web; print(sorted(m for m in sys.modules " \
           "if m.split('.')[0] in ('fastapi', 'starlette', 'uvicorn')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
