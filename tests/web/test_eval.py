"""``rxllm eval`` and the server's eval-set routes on ADK's eval-set format, against the stub model."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rxllm.cli import main
from rxllm.testing import StubServer
from rxllm.web import create_app, rouge1_f

from .support import MODEL_URL_ENV, OrderModel, serving, write_agents_dir

QUESTION = {"role": "user", "parts": [{"text": "Where is order A17?"}]}


def eval_set(final_text: str, tool_args: dict[str, Any]) -> dict[str, Any]:
    """An eval set as ADK writes it (snake_case), one case of one invocation."""
    return {
        "eval_set_id": "orders",
        "eval_cases": [{
            "eval_id": "where_is_a17",
            "conversation": [{
                "invocation_id": "i1",
                "user_content": {"role": "user", "parts": [{"text": "Where is order A17?"}]},
                "final_response": {"role": "model", "parts": [{"text": final_text}]},
                "intermediate_data": {"tool_uses": [{"name": "get_order", "args": tool_args}],
                                      "intermediate_responses": []},
            }],
            "session_input": {"app_name": "order", "user_id": "eval_user", "state": {}},
        }],
    }


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with StubServer(responder=OrderModel()) as stub:
        monkeypatch.setenv(MODEL_URL_ENV, stub.url)
        yield write_agents_dir(tmp_path)


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_a_matching_case_passes_and_the_results_are_written(agents: Path, tmp_path: Path) -> None:
    path = agents / "order" / "orders.evalset.json"
    path.write_text(json.dumps(eval_set("It shipped Tuesday.", {"order_id": "A17"})))
    result_file = tmp_path / "result.json"
    code, out = run_cli("eval", str(agents / "order"), str(path), "--result", str(result_file))
    assert code == 0, out
    assert "where_is_a17" in out and "PASSED" in out and "1.00 (>= 1.00)" in out and "1.00 (>= 0.80)" in out
    result = json.loads(result_file.read_text())
    case = result["eval_case_results"][0]
    assert case["final_eval_status"] == 1 and case["eval_id"] == "where_is_a17"
    scores = {m["metric_name"]: m["score"] for m in case["overall_eval_metric_results"]}
    assert scores == {"tool_trajectory_avg_score": 1.0, "response_match_score": 1.0}
    actual = case["eval_metric_result_per_invocation"][0]["actual_invocation"]
    assert actual["intermediate_data"]["tool_uses"] == [{"name": "get_order", "args": {"order_id": "A17"}}]


def test_a_wrong_tool_argument_fails_the_case_and_exits_non_zero(agents: Path) -> None:
    path = agents / "order" / "orders.evalset.json"
    path.write_text(json.dumps(eval_set("It shipped Tuesday.", {"order_id": "B99"})))
    code, out = run_cli("eval", str(agents / "order"), str(path))
    assert code == 1
    assert "FAILED" in out and "0.00 (>= 1.00)" in out
    history = list((agents / "order" / ".adk" / "eval_history").glob("*.evalset_result.json"))
    assert len(history) == 1


def test_thresholds_come_from_test_config_json(agents: Path) -> None:
    path = agents / "order" / "orders.evalset.json"
    path.write_text(json.dumps(eval_set("The order shipped on Tuesday morning.", {"order_id": "A17"})))
    code, out = run_cli("eval", str(agents / "order"), str(path))
    score = rouge1_f("The order shipped on Tuesday morning.", "It shipped Tuesday.")
    assert code == 1 and score < 0.8 and f"{score:.2f} (>= 0.80)" in out
    (agents / "order" / "test_config.json").write_text(json.dumps({"criteria": {"response_match_score": 0.4}}))
    code, out = run_cli("eval", str(agents / "order"), str(path))
    assert code == 0 and "tool_trajectory" in out and f"{score:.2f} (>= 0.40)" in out


def test_the_server_lists_and_runs_eval_sets(agents: Path) -> None:
    (agents / "order" / "orders.evalset.json").write_text(json.dumps(eval_set("It shipped Tuesday.",
                                                                              {"order_id": "A17"})))
    with serving(create_app(agents, web=False)) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/apps/order/eval_sets").json() == ["orders"]
        assert client.get("/apps/order/eval_sets/orders/evals").json() == ["where_is_a17"]
        ran = client.post("/apps/order/eval_sets/orders/run_eval", json={"evalIds": []})
        assert ran.status_code == 200
        assert [(r["evalId"], r["finalEvalStatus"]) for r in ran.json()] == [("where_is_a17", 1)]
        assert client.get("/apps/order/eval_sets/nope/evals").status_code == 400
        # eval sessions are not listed with the user's sessions (as in ADK)
        assert client.get("/apps/order/users/eval_user/sessions").json() == []


def test_a_file_that_is_no_eval_set_is_exit_code_2(agents: Path) -> None:
    bad = agents / "order" / "bad.evalset.json"
    bad.write_text('{"eval_cases": "nope"}')
    code, _ = run_cli("eval", str(agents / "order"), str(bad))
    assert code == 2


def test_eval_set_routes_create_add_session_edit_run_and_results(agents: Path) -> None:
    """ADK's eval-set routes, at ADK 1.x's paths (``/apps/...``) and 2.x's (``/dev/apps/...``)."""
    with serving(create_app(agents, web=False, trace=True)) as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        # create: 2.x's body form answers the eval set; 1.x's path form answers null
        created = client.post("/dev/apps/order/eval-sets", json={"evalSet": {"evalSetId": "orders", "evalCases": []}})
        assert created.status_code == 200, created.text
        assert created.json()["evalSetId"] == "orders" and created.json()["evalCases"] == []
        assert client.post("/apps/order/eval_sets/more").json() is None
        assert client.post("/apps/order/eval_sets/more").status_code == 400  # it exists
        assert client.post("/apps/order/eval_sets/bad-id").status_code == 400  # ADK's id rule: [a-zA-Z0-9_]+
        assert client.get("/apps/order/eval_sets").json() == ["more", "orders"]
        assert client.get("/dev/apps/order/eval-sets").json() == {"evalSetIds": ["more", "orders"]}
        assert (agents / "order" / "orders.evalset.json").is_file()  # where ADK keeps it

        # a conversation becomes an eval case
        client.post("/apps/order/users/u1/sessions/s1").raise_for_status()
        client.post("/run", json={"appName": "order", "userId": "u1", "sessionId": "s1", "newMessage": QUESTION}
                    ).raise_for_status()
        added = client.post("/dev/apps/order/eval_sets/orders/add_session",
                            json={"evalId": "a17", "sessionId": "s1", "userId": "u1"})
        assert added.status_code == 200, added.text
        again = client.post("/apps/order/eval-sets/orders/add-session",
                            json={"evalId": "a17", "sessionId": "s1", "userId": "u1"})
        assert again.status_code == 400 and "already exists" in again.json()["detail"]
        missing = client.post("/apps/order/eval_sets/orders/add_session",
                              json={"evalId": "x", "sessionId": "nope", "userId": "u1"})
        assert missing.status_code == 404
        assert client.get("/apps/order/eval_sets/orders/evals").json() == ["a17"]
        case = client.get("/dev/apps/order/eval-sets/orders/eval-cases/a17").json()
        invocation = case["conversation"][0]
        assert invocation["userContent"]["parts"][0]["text"] == "Where is order A17?"
        assert invocation["finalResponse"]["parts"][0]["text"] == "It shipped Tuesday."
        assert invocation["intermediateData"]["toolUses"] == [{"name": "get_order", "args": {"order_id": "A17"}}]

        # edit the case (the expected answer), run it, read the stored result
        invocation["finalResponse"] = {"role": "model", "parts": [{"text": "It shipped on Tuesday."}]}
        assert client.put("/apps/order/eval_sets/orders/evals/a17", json=case).status_code == 200
        assert client.put("/apps/order/eval_sets/orders/evals/a17", json={**case, "evalId": "other"}
                          ).status_code == 400
        ran = client.post("/dev/apps/order/eval-sets/orders/run", json={"evalCaseIds": ["a17"], "evalMetrics": [
            {"metricName": "tool_trajectory_avg_score", "threshold": 1.0},
            {"metricName": "response_match_score", "threshold": 0.8}]})
        assert ran.status_code == 200, ran.text
        (result,) = ran.json()["runEvalResults"]
        assert result["evalId"] == "a17" and result["evalSetFile"] == "orders.evalset.json"
        assert result["finalEvalStatus"] == 1
        scores = {m["metricName"]: m["score"] for m in result["overallEvalMetricResults"]}
        assert scores == {"tool_trajectory_avg_score": 1.0,
                          "response_match_score": rouge1_f("It shipped on Tuesday.", "It shipped Tuesday.")}
        # the eval session's spans name its events, as a streamed run's do (ADK's UI shows them from a result)
        spans = client.get(f"/dev/apps/order/debug/trace/session/{result['sessionId']}").json()
        assert sum(1 for s in spans if "gcp.vertex.agent.event_id" in s["attributes"]) == 3  # 2 model calls, 1 tool
        legacy = client.post("/apps/order/eval_sets/orders/run_eval", json={"evalIds": []})
        assert [r["evalId"] for r in legacy.json()] == ["a17"]
        result_ids = client.get("/apps/order/eval_results").json()
        assert len(result_ids) == 2 and client.get("/dev/apps/order/eval-results").json() == {
            "evalResultIds": result_ids}
        stored = client.get(f"/dev/apps/order/eval_results/{result_ids[0]}").json()
        assert stored["evalSetId"] == "orders" and stored["evalCaseResults"][0]["evalId"] == "a17"
        assert client.get("/apps/order/eval-results/nope").status_code == 404
        assert client.get("/apps/order/eval_results/..%2F..%2Fsecret").status_code in (400, 404)
        names = [m["metricName"] for m in client.get("/dev/apps/order/metrics-info").json()["metricsInfo"]]
        assert names == ["tool_trajectory_avg_score", "response_match_score"]

        # delete the case; unknown sets and cases are ADK's errors
        assert client.delete("/dev/apps/order/eval_sets/orders/evals/a17").status_code == 200
        assert client.get("/apps/order/eval_sets/orders/evals").json() == []
        assert client.get("/apps/order/eval_sets/orders/evals/a17").status_code == 404
        assert client.get("/apps/order/eval_sets/nope/evals").status_code == 400
        assert client.post("/apps/order/eval_sets/nope/run_eval", json={}).status_code == 400
        assert client.get("/apps/nope/eval_sets").status_code == 404
