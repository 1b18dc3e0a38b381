"""A minimal headless-Chromium driver over the Chrome DevTools Protocol (a WebSocket).

Starts Debian's ``chromium`` with a throwaway profile and ``--remote-debugging-port=0``, reads
the DevTools address it prints, and talks CDP through ``websockets``' synchronous client. Waiting
is done in the page: :meth:`Tab.wait` evaluates a promise that resolves when a JavaScript
condition holds (checked on the page's own timers), so the test never sleeps.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
from typing import Any

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--remote-debugging-port=0",
]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    """One headless Chromium process and a CDP connection to it (flattened target sessions)."""

    def __init__(self) -> None:
        from websockets.sync.client import connect

        executable = chromium_path()
        if executable is None:
            raise RuntimeError("no chromium on PATH")
        self._profile = tempfile.mkdtemp(prefix="rxllm-chromium-")
        self._process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        assert self._process.stderr is not None
        address = None
        for line in self._process.stderr:  # chromium prints the address once it listens
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                address = found.group(1)
                break
        if address is None:
            self.close()
            raise RuntimeError("chromium exited without a DevTools address")
        self._stack = contextlib.ExitStack()
        self._ws = self._stack.enter_context(connect(address, max_size=None, open_timeout=30))
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []  # CDP events seen while waiting for replies (kept when keep_events)
        self.keep_events = False

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one CDP command and return its result (events in between are dropped, or kept in
        :attr:`events` when :attr:`keep_events` is set)."""
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if self.keep_events and "method" in reply:
                self.events.append(reply)

    def open(self, url: str) -> Tab:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        tab = Tab(self, target, session)
        self.call("Page.enable", session)
        self.call("Runtime.enable", session)
        tab.navigate(url)
        return tab

    def close(self) -> None:
        stack = getattr(self, "_stack", None)
        if stack is not None:
            stack.close()
        self._process.kill()
        self._process.wait(30)
        if self._process.stderr is not None:
            self._process.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)


class Tab:
    """One page of the browser."""

    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self.browser = browser
        self.target = target
        self.session = session

    def navigate(self, url: str) -> None:
        self.browser.call("Page.navigate", self.session, url=url)

    def reload(self) -> None:
        self.browser.call("Page.reload", self.session, ignoreCache=True)

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited)."""
        result = self.browser.call("Runtime.evaluate", self.session, expression=expression,
                                   awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise AssertionError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    def wait(self, condition: str, timeout_ms: int = 20_000) -> Any:
        """Wait, in the page, until the JavaScript ``condition`` is truthy; return its value."""
        script = f"""new Promise((resolve, reject) => {{
            const started = Date.now();
            const check = () => {{
                let value;
                try {{ value = ({condition}); }} catch (error) {{ value = undefined; }}
                if (value) return resolve(value);
                if (Date.now() - started > {timeout_ms}) return reject(new Error("timed out waiting for: " +
                    {json.dumps(condition)} + " | page: " + document.body.innerText.slice(0, 2000)));
                setTimeout(check, 25);
            }};
            check();
        }})"""
        return self.eval(script)

    def close(self) -> None:
        self.browser.call("Target.closeTarget", targetId=self.target)
