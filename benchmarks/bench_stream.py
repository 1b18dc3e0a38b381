"""µs per chunk, time to first partial and peak memory: rxllm against the practical floor.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_stream.py --chunks 100000 --reps 5``).

Every contender reads the same pre-encoded body from the same loopback server (a separate
process, see ``_server.py``), in one run, interleaved rep by rep; the table shows medians and
the ratio to the floor measured in the same run:

* ``floor``: httpx ``iter_lines`` + ``json.loads`` + join (what a careful hand-written client does);
* ``rxllm``: ``OpenAiChatModel.generate_content(stream=True)``, every partial delivered to a
  subscriber and the final aggregate built (usage, finish reason, parsed tool arguments);
* ``openai-sdk create`` / ``openai-sdk .stream()`` when the ``openai`` package is installed;
* with ``--tracing``: rxllm with telemetry switched off against rxllm traced into the OpenTelemetry
  SDK (an in-memory span exporter and metric reader), to show that spans cost per call, not per
  chunk (target: under 3 % apart).

Peak memory is measured in a separate pass with ``tracemalloc`` (which slows code down, so its
pass is not timed) at two stream lengths, to show it grows linearly with the stream.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import BenchServer

import rxllm
from rxllm import Content, LlmRequest, LlmResponse, Part, RetryPolicy
from rxllm.providers.openai import OpenAiChatModel

_REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("go")])])
Runner = Callable[[str, int], tuple[float, float, int]]  # (seconds, seconds to first item, result size)


def floor_text(url: str, n: int) -> tuple[float, float, int]:
    """httpx iter_lines + json.loads + join: the practical floor.

    ``floor_tools`` repeats this loop on purpose: each floor is the tightest loop for its shape, so
    the ratios are never flattered by a shared, slower one.
    """
    with httpx.Client(timeout=60) as client:
        started = time.perf_counter()
        first = 0.0
        pieces: list[str] = []
        url = f"{url}/text/{n}/chat/completions"
        with client.stream("POST", url, json={"model": "bench", "stream": True}) as response:
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                choices = chunk["choices"]
                if choices:
                    content = choices[0]["delta"].get("content")
                    if content:
                        if not first:
                            first = time.perf_counter() - started
                        pieces.append(content)
        text = "".join(pieces)
        return time.perf_counter() - started, first, len(text)


def floor_tools(url: str, n: int) -> tuple[float, float, int]:
    """The floor for a tool call: concatenate argument fragments, parse once."""
    with httpx.Client(timeout=60) as client:
        started = time.perf_counter()
        first = 0.0
        pieces: list[str] = []
        url = f"{url}/tools/{n}/chat/completions"
        with client.stream("POST", url, json={"model": "bench", "stream": True}) as response:
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                choices = chunk["choices"]
                if choices:
                    for call in choices[0]["delta"].get("tool_calls") or ():
                        if not first:
                            first = time.perf_counter() - started
                        pieces.append(call["function"].get("arguments") or "")
        args = json.loads("".join(pieces))
        return time.perf_counter() - started, first, len(args["items"])


def _rxllm(kind: str) -> Runner:
    def run(url: str, n: int) -> tuple[float, float, int]:
        model = OpenAiChatModel("bench", base_url=f"{url}/{kind}/{n}", retry_policy=RetryPolicy.never())
        done = threading.Event()
        first = [0.0]
        final: list[LlmResponse] = []
        errors: list[Exception] = []

        def on_next(response: LlmResponse) -> None:
            if response.partial:
                if not first[0]:
                    first[0] = time.perf_counter() - started
            else:
                final.append(response)

        started = time.perf_counter()
        model.generate_content(_REQUEST, stream=True).subscribe(
            on_next, lambda e: (errors.append(e), done.set()), done.set
        )
        done.wait(120)
        elapsed = time.perf_counter() - started
        if errors:
            raise errors[0]
        size = len(final[0].text()) if kind == "text" else len(final[0].function_calls()[0].args["items"])  # type: ignore[arg-type]
        if kind == "tools" and not first[0]:
            first[0] = elapsed  # tool calls ride on the final only, by contract
        return elapsed, first[0], size

    return run


def _openai_sdk(helper: bool) -> Runner | None:
    try:
        import openai
    except ImportError:
        return None

    def run(url: str, n: int) -> tuple[float, float, int]:
        client = openai.OpenAI(base_url=f"{url}/text/{n}", api_key="bench", max_retries=0)
        started = time.perf_counter()
        first = 0.0
        if helper:
            with client.chat.completions.stream(model="bench", messages=[{"role": "user", "content": "go"}]) as s:
                for event in s:
                    if not first and event.type == "content.delta":
                        first = time.perf_counter() - started
                text = s.get_final_completion().choices[0].message.content or ""
        else:
            pieces = []
            for chunk in client.chat.completions.create(
                model="bench", messages=[{"role": "user", "content": "go"}], stream=True
            ):
                if chunk.choices and chunk.choices[0].delta.content:
                    if not first:
                        first = time.perf_counter() - started
                    pieces.append(chunk.choices[0].delta.content)
            text = "".join(pieces)
        return time.perf_counter() - started, first, len(text)

    return run


def _telemetry_off(run: Runner) -> Runner:
    def off(url: str, n: int) -> tuple[float, float, int]:
        rxllm.configure_telemetry(enabled=False)
        try:
            return run(url, n)
        finally:
            rxllm.configure_telemetry()

    return off


def _traced(run: Runner) -> Runner:
    """``run`` with rxllm's spans and metrics going to the OpenTelemetry SDK (in memory)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def traced(url: str, n: int) -> tuple[float, float, int]:
        rxllm.configure_telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
        try:
            result = run(url, n)
        finally:
            rxllm.configure_telemetry()
        spans = exporter.get_finished_spans()
        assert len(spans) == 1 and spans[0].name == "chat bench", spans  # one span per call, never per chunk
        exporter.clear()
        return result

    return traced


def peak_memory(run: Runner, url: str, n: int) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run(url, n)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


TELEMETRY_OFF = "rxllm, telemetry off"
TRACED = "rxllm, traced (OTel SDK, in-memory)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--tracing", action="store_true", help="add rxllm rows with telemetry off and traced (SDK)")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_stream.json")
    args = parser.parse_args()

    contenders: dict[str, tuple[str, Runner]] = {
        "floor (httpx iter_lines + json.loads)": ("text", floor_text),
        "rxllm generate_content(stream=True)": ("text", _rxllm("text")),
        "floor, tool call": ("tools", floor_tools),
        "rxllm, tool call": ("tools", _rxllm("tools")),
    }
    if args.tracing:
        contenders[TELEMETRY_OFF] = ("text", _telemetry_off(_rxllm("text")))
        contenders[TRACED] = ("text", _traced(_rxllm("text")))
    for name, helper in (("openai SDK create(stream=True)", False), ("openai SDK .stream() helper", True)):
        sdk = _openai_sdk(helper)
        if sdk is not None:
            contenders[name] = ("text", sdk)

    results: dict[str, dict[str, list[float]]] = {name: {"total": [], "first": []} for name in contenders}
    with BenchServer() as server:
        for _, run in contenders.values():  # warm-up: imports, connections, caches
            run(server.url, 1000)
        for _ in range(args.reps):
            for name, (_, run) in contenders.items():
                total, first, _size = run(server.url, args.chunks)
                results[name]["total"].append(total)
                results[name]["first"].append(first)
        memory = {
            name: {str(n): peak_memory(run, server.url, n) for n in (args.chunks // 4, args.chunks)}
            for name, (_, run) in contenders.items()
            if "SDK" not in name
        }

    floors = {"text": "floor (httpx iter_lines + json.loads)", "tools": "floor, tool call"}
    rows = []
    for name, (kind, _) in contenders.items():
        us = statistics.median(results[name]["total"]) / args.chunks * 1e6
        floor_us = statistics.median(results[floors[kind]]["total"]) / args.chunks * 1e6
        rows.append(
            {
                "contender": name,
                "kind": kind,
                "us_per_chunk": round(us, 2),
                "ratio_to_floor": round(us / floor_us, 2),
                "first_item_ms": round(statistics.median(results[name]["first"]) * 1e3, 2),
                "peak_mib": {k: round(v / 2**20, 2) for k, v in memory.get(name, {}).items()},
            }
        )
    print(
        f"\n{args.chunks} chunks per stream, {args.reps} interleaved reps, medians; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpus\n"
    )
    header = f"{'contender':40} {'µs/chunk':>9} {'vs floor':>9} {'1st item ms':>12}  peak MiB (n/4 → n)"
    print(header)
    print("-" * len(header))
    for row in rows:
        mem = row["peak_mib"]
        mem_text = " → ".join(f"{v}" for v in mem.values()) if mem else "-"
        print(
            f"{row['contender']:40} {row['us_per_chunk']:>9} {row['ratio_to_floor']:>8}× {row['first_item_ms']:>12}  "
            f"{mem_text}"
        )
    summary: dict[str, object] = {"chunks": args.chunks, "reps": args.reps, "rows": rows}
    if args.tracing:
        by_name = {row["contender"]: row["us_per_chunk"] for row in rows}
        off, on = by_name[TELEMETRY_OFF], by_name[TRACED]
        difference = (on / off - 1) * 100  # type: ignore[operator]
        summary["tracing_cost_percent"] = round(difference, 2)
        print(f"\ntracing on vs off: {difference:+.2f} % per chunk (target: under 3 %)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
