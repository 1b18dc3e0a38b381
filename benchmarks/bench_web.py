"""100 concurrent ``/run_sse`` clients against one ``rxllm api-server`` process and a scripted model.

Run: ``.venv/bin/python benchmarks/bench_web.py`` (``--clients 100 --chunks 50 --pace 0.01``).

The server is a child process (``python -m rxllm api-server``) serving a temporary agents folder
whose one app is an ``LlmAgent`` on a ``ScriptedLlm``: each call streams ``--chunks`` text chunks,
``--pace`` seconds apart (a model that takes ``chunks * pace`` seconds per answer). The benchmark
creates one session per client, then opens every stream at once (``httpx.AsyncClient``) and
reports: streams complete (the final, non-partial event arrived), time to first event (p50, p95,
max, from sending the request), wall time for all, and the server's RSS (``VmHWM``, peak, and
``VmRSS`` after the run, from ``/proc``).

The floor, measured in the same run with the same clients: a plain FastAPI app under the same
uvicorn whose ``/run_sse`` streams the same number of events at the same pace with no agent
runtime behind it (no session store, no runner, no model layer). The ratios say what rxllm's
runtime adds on a machine whose load varies from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx

APP = textwrap.dedent('''
    from rxllm import Chunk
    from rxllm.agents import LlmAgent
    from rxllm.testing import ScriptedLlm, at_times, scripted_turn

    CHUNKS, PACE, TURNS = {chunks}, {pace}, {turns}
    turn = at_times(scripted_turn(*[Chunk(text_delta=f"w{{i}} ") for i in range(CHUNKS)]),
                    [PACE * (i + 1) for i in range(CHUNKS + 1)])
    root_agent = LlmAgent("bench", ScriptedLlm([turn] * TURNS))
''')


FLOOR = textwrap.dedent('''
    import asyncio, json

    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    CHUNKS, PACE = {chunks}, {pace}
    app = FastAPI()


    @app.get("/list-apps")
    def list_apps():
        return ["bench"]


    @app.post("/apps/bench/users/u/sessions/{{session_id}}")
    def create_session(session_id: str):
        return {{"id": session_id}}


    @app.post("/run_sse")
    async def run_sse(request: dict):
        async def frames():
            for i in range(CHUNKS):
                await asyncio.sleep(PACE)
                event = {{"partial": True, "content": {{"parts": [{{"text": f"w{{i}} "}}]}}}}
                yield "data: " + json.dumps(event) + "\\n\\n"
            await asyncio.sleep(PACE)
            yield "data: " + json.dumps({{"content": {{"parts": [{{"text": "done"}}]}}}}) + "\\n\\n"

        return StreamingResponse(frames(), media_type="text/event-stream")
''')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])  # kB
    return 0


async def one_stream(client: httpx.AsyncClient, session_id: str) -> tuple[float, bool]:
    request = {"appName": "bench", "userId": "u", "sessionId": session_id, "streaming": True,
               "newMessage": {"role": "user", "parts": [{"text": "go"}]}}
    started = time.perf_counter()
    first = None
    final = False
    async with client.stream("POST", "/run_sse", json=request) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if first is None:
                first = time.perf_counter() - started
            event = json.loads(line[6:])
            if "error" in event:
                raise RuntimeError(event["error"])
            if not event.get("partial"):
                final = True
    return (first if first is not None else float("inf")), final


async def run(url: str, clients: int) -> tuple[list[float], int, float]:
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        for i in range(clients):
            (await client.post(f"/apps/bench/users/u/sessions/s{i}")).raise_for_status()
        started = time.perf_counter()
        results = await asyncio.gather(*(one_stream(client, f"s{i}") for i in range(clients)))
        wall = time.perf_counter() - started
    return [r[0] for r in results], sum(1 for r in results if r[1]), wall


def serve(command: list[str], env: dict[str, str], clients: int) -> tuple[list[float], int, float, int, int, int]:
    """Start a server child, run the clients against it; (first-event times, complete, wall, RSS idle/peak/after)."""
    port = free_port()
    server = subprocess.Popen([*command, "--port", str(port)], env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # wait for the child to listen
            try:
                httpx.get(f"{url}/list-apps", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        rss_idle = proc_status(server.pid, "VmRSS")
        firsts, complete, wall = asyncio.run(run(url, clients))
        peak = proc_status(server.pid, "VmHWM")
        after = proc_status(server.pid, "VmRSS")
    finally:
        server.terminate()
        server.wait(30)
    firsts.sort()
    return firsts, complete, wall, rss_idle, peak, after


def p95(values: list[float]) -> float:
    return values[max(0, round(0.95 * len(values)) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--pace", type=float, default=0.01)
    args = parser.parse_args()
    env = {**os.environ, "RXLLM_TELEMETRY": "off"}
    with tempfile.TemporaryDirectory() as folder:
        agents = Path(folder) / "agents"
        agents.mkdir()
        (agents / "bench.py").write_text(APP.format(chunks=args.chunks, pace=args.pace, turns=args.clients + 1))
        (Path(folder) / "floor.py").write_text(FLOOR.format(chunks=args.chunks, pace=args.pace))
        floor = serve([sys.executable, "-m", "uvicorn", "floor:app", "--app-dir", folder, "--log-level", "warning"],
                      env, args.clients)
        rx = serve([sys.executable, "-m", "rxllm", "api-server", str(agents), "--no-trace", "--log-level", "warning"],
                   env, args.clients)
    print(f"clients: {args.clients}, model: {args.chunks} chunks x {args.pace * 1000:.0f} ms "
          f"({args.chunks * args.pace:.2f} s per answer); load average {os.getloadavg()[0]:.1f}")
    print(f"{'':26}{'rxllm api-server':>18}{'plain FastAPI (floor)':>24}{'ratio':>8}")
    rows = [
        ("streams complete", f"{rx[1]}/{args.clients}", f"{floor[1]}/{args.clients}", ""),
        ("first event p50 (ms)", f"{statistics.median(rx[0]) * 1000:.1f}", f"{statistics.median(floor[0]) * 1000:.1f}",
         f"{statistics.median(rx[0]) / statistics.median(floor[0]):.2f}x"),
        ("first event p95 (ms)", f"{p95(rx[0]) * 1000:.1f}", f"{p95(floor[0]) * 1000:.1f}",
         f"{p95(rx[0]) / p95(floor[0]):.2f}x"),
        ("first event max (ms)", f"{rx[0][-1] * 1000:.1f}", f"{floor[0][-1] * 1000:.1f}", ""),
        ("wall time, all (s)", f"{rx[2]:.2f}", f"{floor[2]:.2f}", f"{rx[2] / floor[2]:.2f}x"),
        ("RSS idle (MiB)", f"{rx[3] / 1024:.1f}", f"{floor[3] / 1024:.1f}", ""),
        ("RSS peak (MiB)", f"{rx[4] / 1024:.1f}", f"{floor[4] / 1024:.1f}", ""),
        ("RSS after (MiB)", f"{rx[5] / 1024:.1f}", f"{floor[5] / 1024:.1f}", ""),
    ]
    for name, *cells in rows:
        print(f"{name:26}{cells[0]:>18}{cells[1]:>24}{cells[2]:>8}")
    return 0 if rx[1] == args.clients and floor[1] == args.clients else 1


if __name__ == "__main__":
    sys.exit(main())
