"""Disposing a ParallelAgent run: how soon the server sees every branch's connection closed.

Each of ``--branches`` LlmAgents streams from a loopback OpenAI-compatible stub server that holds
its response open after the first text delta. Once every branch has emitted a partial, the run's
subscription is disposed; the figure is the time from ``dispose()`` to the moment the *server*
observed the client close, for the slowest branch (the target is < 200 ms). Repeated ``--reps``
times; prints the median and the worst.

Run: ``.venv/bin/python benchmarks/bench_parallel_dispose.py --branches 4 --reps 20``
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from rxllm import Content, Part
from rxllm.agents import Event, InMemoryRunner, LlmAgent, ParallelAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Hold, StubResponse, StubServer, sse_turn


def once(branches: int) -> float:
    release = threading.Event()
    turn = sse_turn("openai-chat", text=["Half ", "an answer"])
    held = StubResponse(body=(*turn[:2], Hold(release, timeout=30.0), *turn[2:]))
    with StubServer([held] * branches) as server:
        model = OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real")
        names = [f"branch_{i}" for i in range(branches)]
        fan = ParallelAgent("fan", sub_agents=[LlmAgent(name, model) for name in names])
        runner = InMemoryRunner(fan)
        runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
        seen: set[str] = set()
        all_streaming = threading.Event()

        def on_next(event: Event) -> None:
            seen.add(event.author)
            if len(seen) == branches:
                all_streaming.set()

        message = Content(role="user", parts=(Part.from_text("go"),))
        subscription = runner.run_async("u1", "s1", message, RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
            on_next
        )
        if not all_streaming.wait(10):
            raise RuntimeError("the branches did not all stream")
        connections = server.connections[:branches]
        disposed_at = time.monotonic()
        subscription.dispose()
        for connection in connections:
            if not connection.wait_closed_by_client(5):
                raise RuntimeError("a connection stayed open")
        release.set()
        return max((c.closed_at or 0.0) - disposed_at for c in connections)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--branches", type=int, default=4)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    figures = [once(args.branches) for _ in range(args.reps)]
    print(
        f"parallel dispose, {args.branches} branches, {args.reps} runs: slowest branch closed "
        f"{statistics.median(figures) * 1000:.1f} ms after dispose (median), {max(figures) * 1000:.1f} ms worst"
    )


if __name__ == "__main__":
    main()
