"""ADK's own dev UI against rxllm: ``make adk-ui-check`` (not part of the suite: it needs google-adk).

Usage: ``python tests/web/adk_ui_check.py --ui PATH`` where PATH is the built UI inside the
google-adk package (``google/adk/cli/browser``); the Makefile target installs google-adk into the
throwaway ``.adk-ui-venv/`` and finds the folder.

What it does:

1. starts ``python -m rxllm web examples/agents --ui PATH`` on 127.0.0.1 (a child process, its
   uvicorn access log kept: every request the UI made, with its status);
2. opens the UI in headless Chromium (Chrome DevTools Protocol, ``tests/web/browser.py``) with
   the UI's own "Streaming" setting on (its ``adk-use-sse`` local-storage key, as its toggle sets
   it), and records every request and response of the page (CDP ``Network`` events);
3. checks that the UI lists the apps (its app selector shows both), that choosing
   ``order_status`` and sending "Where is order A17?" creates a session
   (``POST /apps/order_status/users/user/sessions``) and runs it over ``/run_sse`` with
   ``"streaming": true``, that the answer streams (partial events on the SSE stream) and the UI
   shows the tool call (``get_order``) and the final answer, that the trace view's
   ``/dev/apps/.../debug/trace/session/...`` answered, and that after a reload with the session in
   the URL the UI shows the stored history (``GET`` of the session); that in the Evals tab an eval
   set can be created, the session added to it as a case, and the case run (with the metrics
   ``metrics-info`` lists), passing, with its result stored in the app's ``.adk/eval_history/``
   (the server serves a temporary copy of the agents folder, so the repository stays clean);
4. prints every API request the UI made with its status, and fails when any API route the checked
   features use answered an error. Routes of ADK features rxllm does not have (the agent builder,
   agent graphs) answer 404 and are listed as such.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.web.browser import Browser, Tab  # noqa: E402

QUESTION = "Where is order A17?"
ANSWER = "Order A17 shipped with DHL on Monday and arrives Tuesday."
# ADK features rxllm has no counterpart for: the UI asks, rxllm answers 404 (ADK too, for an app it
# cannot graph), and the UI carries on without them.
NOT_PROVIDED = re.compile(r"^/dev/apps/[^/]+/(build_graph|build_graph_image|builder)(\?|$)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def text(tab: Tab) -> str:
    value: str = tab.eval("document.body.innerText")
    return value


def network(browser: Browser) -> list[dict[str, Any]]:
    """The page's API requests: method, path, status, request body (from the CDP Network events)."""
    requests: dict[str, dict[str, Any]] = {}
    for event in browser.events:
        params = event.get("params", {})
        if event["method"] == "Network.requestWillBeSent":
            request = params["request"]
            requests[params["requestId"]] = {"method": request["method"], "url": request["url"],
                                             "body": request.get("postData"), "status": None, "type": None}
        elif event["method"] == "Network.responseReceived" and params["requestId"] in requests:
            requests[params["requestId"]]["status"] = params["response"]["status"]
            requests[params["requestId"]]["type"] = params["response"].get("mimeType")
    return list(requests.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ui", required=True, help="the built ADK web UI folder (google/adk/cli/browser)")
    parser.add_argument("--agents", default=str(ROOT / "examples" / "agents"))
    args = parser.parse_args()
    if not (Path(args.ui) / "index.html").is_file():
        print(f"adk-ui-check: {args.ui} has no index.html", file=sys.stderr)
        return 2
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # the eval steps write eval sets and results into the app's folder, as ADK does: serve a copy
    workdir = tempfile.mkdtemp(prefix="rxllm-adk-ui-")
    agents = shutil.copytree(args.agents, Path(workdir) / "agents",
                             ignore=shutil.ignore_patterns("__pycache__", ".adk", "*.evalset.json"))
    log = tempfile.NamedTemporaryFile("w+", prefix="rxllm-adk-ui-", suffix=".log", delete=False)  # noqa: SIM115
    env = {k: v for k, v in os.environ.items() if k not in ("RXLLM_EXAMPLE_MODEL", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    server = subprocess.Popen(
        [sys.executable, "-m", "rxllm", "web", str(agents), "--ui", args.ui, "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "info"], stdout=log, stderr=subprocess.STDOUT, env=env)
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    browser: Browser | None = None
    try:
        for _ in range(400):
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None:
                raise RuntimeError("rxllm web exited: " + Path(log.name).read_text())
            time.sleep(0.05)  # polling a child process that is starting, not test synchronisation
        print(f"rxllm web {agents} --ui {args.ui}  ({url}; a copy of {args.agents})")
        browser = Browser()
        browser.keep_events = True
        tab = browser.open(f"{url}/dev-ui/")
        browser.call("Network.enable", tab.session)
        tab.wait("document.readyState === 'complete'")
        tab.eval("localStorage.setItem('adk-use-sse', 'true'); true")  # the UI's Streaming toggle, on

        # 1. the app list
        tab.navigate(f"{url}/dev-ui/")
        tab.wait("document.body.innerText.includes('Select an app')")
        tab.eval("[...document.querySelectorAll('button')].find(b => b.innerText.includes('Select an app'))"
                 ".click(); true")
        listed = tab.wait("document.body.innerText.includes('order_status') && document.body.innerText.includes"
                          "('dice') && document.body.innerText")
        check("order_status" in listed and "dice" in listed, "the UI lists the apps of examples/agents "
              "(GET /list-apps): dice, order_status")

        # 2. choose an app, send a message: a session is created and the turn streams over /run_sse
        tab.navigate(f"{url}/dev-ui/?app=order_status")
        tab.wait("!!document.querySelector('textarea.chat-input-box')")
        tab.wait("document.body.innerText.includes('order_status')")
        tab.eval(f"""(() => {{
            window.__seen = [];
            new MutationObserver(() => window.__seen.push(document.body.innerText))
                .observe(document.body, {{subtree: true, childList: true, characterData: true}});
            const box = document.querySelector('textarea.chat-input-box');
            box.focus();
            box.value = {json.dumps(QUESTION)};
            box.dispatchEvent(new Event('input', {{bubbles: true}}));
            box.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter', code: 'Enter', keyCode: 13,
                                                            bubbles: true}}));
            return true;
        }})()""")
        shown = tab.wait(f"document.body.innerText.includes({json.dumps(ANSWER)}) && document.body.innerText")
        check(ANSWER in shown, f"the UI shows the streamed answer: {ANSWER!r}")
        check("get_order" in shown, "the UI shows the tool call and its result (get_order)")
        session_id = tab.wait("new URLSearchParams(location.search).get('session')")
        check(bool(session_id), f"the UI created a session and put it in the URL (session={session_id})")
        tab.wait("window.__seen.length > 0")
        partial_views = tab.eval(f"window.__seen.filter(t => !t.includes({json.dumps(ANSWER)}) && "
                                 "t.includes('Order A17')).length")
        # how much of the answer the page showed before the end depends on the UI's rendering: the
        # streaming itself is checked on the wire below.
        print(f"      (the page changed {tab.eval('window.__seen.length')} times while the turn ran; "
              f"{partial_views} showed part of the answer)")

        # clicking the answer opens its event, with the spans the UI links to it (by the spans'
        # gcp.vertex.agent.event_id, from the session's trace)
        tab.eval(f"""(() => {{
            const all = [...document.querySelectorAll('*')].filter(e => e.innerText &&
                e.innerText.trim() === {json.dumps(ANSWER)});
            all[all.length - 1].click();
            return all.length;
        }})()""")
        details = tab.wait("document.body.innerText.includes('Associated Spans') && document.body.innerText", 10_000)
        linked = details.split("Associated Spans", 1)[1][:200]
        check("chat gpt-4o-mini" in linked and session_id is not None,
              "clicking the answer opens its event (Event ID, Invocation ID) with its span: "
              + " ".join(linked.split()[:3]))

        runs = [r for r in network(browser) if r["url"].endswith("/run_sse")]
        check(len(runs) == 1 and runs[0]["status"] == 200 and runs[0]["type"] == "text/event-stream",
              "POST /run_sse answered 200 text/event-stream")
        body = json.loads(runs[0]["body"]) if runs and runs[0]["body"] else {}
        check(body.get("streaming") is True and body.get("appName") == "order_status"
              and body.get("sessionId") == session_id, f"the run request: {json.dumps(body)[:200]}")
        stored = httpx.get(f"{url}/apps/order_status/users/{body.get('userId', 'user')}/sessions/{session_id}").json()
        events = stored.get("events", [])
        check([e["author"] for e in events] == ["user", "support", "support", "support"],
              f"the session stores the turn's events: {[e['author'] for e in events]}")
        sse = httpx.post(f"{url}/run_sse", json={**body, "newMessage": {"role": "user", "parts": [{"text": QUESTION}]}},
                         timeout=30).text
        frames = [json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: ")]
        check(sum(1 for f in frames if f.get("partial")) >= 5,
              f"the same request streams partial events ({sum(1 for f in frames if f.get('partial'))} partial "
              f"of {len(frames)} frames)")

        # 3. the trace view, and the stored history after a reload
        traced = [r for r in network(browser) if "/debug/trace/session/" in r["url"]]
        check(bool(traced) and all(r["status"] == 200 for r in traced),
              "the trace view's GET /dev/apps/order_status/debug/trace/session/... answered "
              f"{[r['status'] for r in traced]}")
        tab.eval("[...document.querySelectorAll('button, .mat-button-toggle-button')]"
                 ".filter(b => b.innerText.trim() === 'Traces').forEach(b => b.click()); true")
        trace_text = tab.wait("document.body.innerText.includes('INVOCATION ID') && document.body.innerText", 10_000)
        check("chat gpt-4o-mini" in trace_text and "get_order" in trace_text and "INVOCATION ID" in trace_text,
              "the Traces tab shows the invocation with rxllm's spans (chat gpt-4o-mini, get_order)")
        tab.navigate(f"{url}/dev-ui/?app=order_status&session={session_id}&userId=user")
        tab.wait("[...document.querySelectorAll('button, .mat-button-toggle-button')]"
                 ".some(b => b.innerText.trim() === 'Events')")
        tab.eval("[...document.querySelectorAll('button, .mat-button-toggle-button')]"
                 ".filter(b => b.innerText.trim() === 'Events').forEach(b => b.click()); true")
        history = tab.wait(f"document.body.innerText.includes({json.dumps(QUESTION)}) && "
                           f"document.body.innerText.includes({json.dumps(ANSWER)}) && document.body.innerText")
        check(QUESTION in history and ANSWER in history, "after a reload the UI shows the stored history "
              "(GET /apps/order_status/users/user/sessions/<id>)")

        # 4. the Evals tab: a new eval set, the session added to it as a case, the case run and scored
        def click(label: str, within: str = "*") -> int:
            found: int = tab.eval(f"""(() => {{
                const all = [...document.querySelectorAll({json.dumps(within)})]
                    .filter(e => e.innerText && e.innerText.trim().split('\\n').pop().trim() === {json.dumps(label)});
                if (all.length) all[all.length - 1].click();
                return all.length;
            }})()""")
            return found

        def fill(value: str) -> None:
            tab.wait("!!document.querySelector('.cdk-overlay-pane input')")
            tab.eval(f"""(() => {{ const box = document.querySelector('.cdk-overlay-pane input'); box.focus();
                box.value = {json.dumps(value)}; box.dispatchEvent(new Event('input', {{bubbles: true}}));
                return true; }})()""")

        click("Evals")
        tab.wait("document.body.innerText.includes('Create Evaluation Set')")
        click("Create Evaluation Set")
        fill("ui_checks")
        click("Create", ".cdk-overlay-pane button")
        tab.wait("document.body.innerText.includes('ui_checks')")
        click("ui_checks")
        tab.wait("document.body.innerText.includes('From Current Session')")
        click("From Current Session")
        fill("a17")
        click("Create", ".cdk-overlay-pane button")
        tab.wait("document.body.innerText.includes('Run All') && document.body.innerText.includes('a17')")
        check((agents / "order_status" / "ui_checks.evalset.json").is_file(), "the Evals tab created an eval "
              "set and added the session to it as the case a17 (order_status/ui_checks.evalset.json)")
        click("Run All")
        dialog = tab.wait("[...document.querySelectorAll('.cdk-overlay-pane')].map(p => p.innerText).join(' ')"
                          ".includes('Tool Trajectory') && document.querySelector('.cdk-overlay-pane').innerText")
        check("Response Match" in dialog, "the run dialog offers rxllm's metrics (GET .../metrics-info)")
        click("Run", ".cdk-overlay-pane button")
        scored = tab.wait("document.body.innerText.includes('1 PASS') && document.body.innerText", 30_000)
        check("Tool Trajectory" in scored and "1.00" in scored,
              "the case ran and passed (the UI shows 1 PASS, Tool Trajectory 1.00; POST .../eval-sets/ui_checks/run)")
        check(len(list((agents / "order_status" / ".adk" / "eval_history").glob("*.evalset_result.json"))) == 1,
              "the result is stored where ADK keeps it (order_status/.adk/eval_history/)")

        # 5. every API request the UI made
        print("\nthe UI's API requests (CDP Network events), method path -> status:")
        seen: set[tuple[str, str, int | None]] = set()
        for request in network(browser):
            if not request["url"].startswith(url) or request["status"] is None:
                continue  # the UI's web fonts (no network here), requests cut short by a navigation
            path = request["url"][len(url):]
            if path.startswith("/dev-ui/") and not path.startswith("/dev-ui/assets/config"):
                continue  # the UI's own files
            key = (request["method"], re.sub(r"[0-9a-f-]{36}", "<id>", re.sub(r"ts=\d+", "ts=<t>", path)),
                   request["status"])
            if key in seen or request["method"] == "OPTIONS":
                continue
            seen.add(key)
            note = "  (an ADK feature rxllm does not provide)" if NOT_PROVIDED.match(key[1]) else ""
            print(f"  {key[0]:6} {key[1]} -> {key[2]}{note}")
            if key[2] is not None and key[2] >= 400 and not note:
                failures.append(f"{key[0]} {key[1]} answered {key[2]}")
    finally:
        if browser is not None:
            browser.close()
        server.terminate()
        server.wait(30)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nthe server's access log: {log.name}")
    if failures:
        print("adk-ui-check: FAILED\n  " + "\n  ".join(failures))
        return 1
    print("adk-ui-check: PASSED (ADK's dev UI listed the apps, created a session, streamed a turn over /run_sse, "
          "showed the events, the trace and the stored history, and ran an eval set made from the session)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
