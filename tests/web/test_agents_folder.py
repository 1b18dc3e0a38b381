"""``examples/agents`` served by ``rxllm.web`` (each app's model is its own loopback stub), and
``--ui PATH``: another built UI folder served in place of rxllm's, as ADK's is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rxllm.cli import main
from rxllm.web import create_app

from .support import serving

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


@pytest.fixture(scope="module")
def api() -> Iterator[httpx.Client]:
    with pytest.MonkeyPatch.context() as env:
        env.delenv("RXLLM_EXAMPLE_MODEL", raising=False)
        with serving(create_app(EXAMPLES, trace=True)) as server, \
                httpx.Client(base_url=server.url, timeout=30) as client:
            yield client


def run_sse(api: httpx.Client, app: str, text: str) -> list[dict[str, Any]]:
    api.post(f"/apps/{app}/users/u1/sessions/s1").raise_for_status()
    request = {"appName": app, "userId": "u1", "sessionId": "s1", "streaming": True,
               "newMessage": {"role": "user", "parts": [{"text": text}]}}
    with api.stream("POST", "/run_sse", json=request) as response:
        assert response.status_code == 200
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def test_the_examples_folder_lists_a_module_app_and_a_package_app(api: httpx.Client) -> None:
    assert api.get("/list-apps").json() == ["dice", "order_status"]
    apps = {a["name"]: a for a in api.get("/list-apps", params={"detailed": "true"}).json()["apps"]}
    assert apps["dice"]["rootAgentName"] == "dice" and apps["order_status"]["rootAgentName"] == "support"
    assert not any("error" in app for app in apps.values())


def test_the_dice_module_app_rolls_with_its_tool(api: httpx.Client) -> None:
    events = run_sse(api, "dice", "Roll a six-sided die.")
    final = [e for e in events if not e.get("partial")]
    (call,) = [p["functionCall"] for e in final for p in e["content"]["parts"] if "functionCall" in p]
    assert call["name"] == "roll_die" and call["args"] == {"sides": 6}
    (result,) = [p["functionResponse"]["response"] for e in final for p in e["content"]["parts"]
                 if "functionResponse" in p]
    assert 1 <= result["result"] <= 6
    assert final[-1]["content"]["parts"][0]["text"] == f"You rolled a {result['result']}."
    assert any(e.get("partial") for e in events)
    state = api.get("/apps/dice/users/u1/sessions/s1").json()["state"]
    assert state == {"rolls": [result["result"]]}


def test_the_order_status_package_app_answers_without_streaming_too(api: httpx.Client) -> None:
    api.post("/apps/order_status/users/u1/sessions/s2").raise_for_status()
    events = api.post("/run", json={"appName": "order_status", "userId": "u1", "sessionId": "s2",
                                    "newMessage": {"role": "user", "parts": [{"text": "Where is order A17?"}]}}).json()
    assert [e["author"] for e in events] == ["support", "support", "support"]
    response = events[1]["content"]["parts"][0]["functionResponse"]
    assert response["name"] == "get_order" and response["response"]["carrier"] == "DHL"
    assert events[-1]["content"]["parts"][0]["text"] == "Order A17 shipped with DHL on Monday and arrives Tuesday."


def test_a_ui_folder_is_served_in_place_of_rxllms(tmp_path: Path) -> None:
    ui = tmp_path / "browser"
    (ui / "assets").mkdir(parents=True)
    (ui / "index.html").write_text("<html><body>a built UI</body></html>")
    (ui / "main-ABC.js").write_text("console.log('ui')")
    (ui / "assets" / "logo.svg").write_text("<svg/>")
    with serving(create_app(EXAMPLES, ui_dir=ui)) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/").headers["location"] == "/dev-ui/"
        index = client.get("/dev-ui/")
        assert index.status_code == 200 and "a built UI" in index.text
        assert client.get("/dev-ui/main-ABC.js").text == "console.log('ui')"
        assert client.get("/dev-ui/assets/logo.svg").status_code == 200
        assert client.get("/dev-ui/app.js").status_code == 404  # rxllm's own UI is not mixed in
        # what ADK's UI reads before it starts: its runtime config and the consent setting (off)
        assert client.get("/dev-ui/assets/config/runtime-config.json").json() == {"backendUrl": "",
                                                                                  "telemetry": False}
        assert client.get("/config/telemetry").json() == {"telemetry": False}
        assert client.get("/version").json()["language"] == "python"
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/dev-ui/..%2F..%2Fsecret").status_code == 404


def test_rxllm_web_refuses_a_ui_folder_without_index_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", str(EXAMPLES), "--ui", str(tmp_path)]) == 2
    assert "has no index.html" in capsys.readouterr().err
