"""µs per chunk, time to first partial, connections and the runtime's cost: rxllm against the floors.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_stream.py --chunks 100000 --reps 5``).

Every streaming contender reads the same pre-encoded body from the same loopback server (a
separate process, see ``_server.py``), in one run, interleaved rep by rep; the table shows medians
and the ratio to the floor of the same wire format measured in the same run:

* ``floor``: httpx2 ``iter_lines`` + ``json.loads`` + join (what a careful hand-written client does),
  one per wire format (OpenAI chat text, an OpenAI tool call, Anthropic, Gemini); the text floor
  also on httpx 0.28 (``floor on httpx 0.28``, while httpx is installed), against httpx2's;
* ``rxllm, partials dropped``: ``generate_content(stream=True)``, every partial delivered to a
  subscriber that looks at it and drops it, the final aggregate built;
* ``rxllm, partials kept``: the same, the subscriber keeps every partial (as ``ops.to_list()``, a
  recorder or a test does), so the garbage collector sees them all;
* ``openai SDK create`` / ``.stream()`` when the ``openai`` package is installed;
* with ``--tracing``: rxllm with telemetry switched off against rxllm traced into the OpenTelemetry
  SDK (an in-memory span exporter and metric reader), to show that spans cost per call, not per
  chunk (target: under 3 % apart).

Peak memory is measured in a separate pass with ``tracemalloc`` (which slows code down, so its
pass is not timed) at two stream lengths, to show it grows linearly with the stream.

Then three call-level sections (see ``_turns.py``): ``--calls`` sequential calls over loopback TLS
(a throwaway CA from ``trustme``), connections the server accepted per session and the median
latency per call; the time to first partial on a ``--small``-chunk stream against the floor's;
and the order-A17 turn (2 model calls, 1 tool) through an agent and a service against the 2 bare
model calls, the overhead per model call (its instructions, without the network and under any
load: ``runtime_instructions.py``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _contenders import (
    Runner,
    floor_anthropic,
    floor_gemini,
    floor_text,
    floor_tools,
    limit_anthropic,
    limit_gemini,
    limit_text,
    openai_sdk_runner,
    rxllm_runner,
)
from _server import BenchServer
from _turns import first_partial, runtime_cost, sequential_calls, short_calls

import rxllm


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


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks per stream (default 100000)")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions (default 5)")
    parser.add_argument("--tracing", action="store_true", help="add rxllm rows with telemetry off and traced (SDK)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    parser.add_argument("--calls", type=int, default=20, help="sequential calls per TLS session (default 20)")
    parser.add_argument("--small", type=int, default=20, help="chunks of the time-to-first-partial stream")
    parser.add_argument("--small-reps", type=int, default=200, help="reps of the small stream and of the turns")
    parser.add_argument("--only", choices=["streams", "calls"],
                        help="run only the per-chunk table, or only the call-level sections")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_stream.json")
    return parser.parse_args()


def _contenders(tracing: bool) -> dict[str, tuple[str, Runner]]:
    contenders: dict[str, tuple[str, Runner]] = {
        FLOORS["text"]: ("text", floor_text),
        "limit (raw socket + json.loads)": ("text", limit_text),
        "rxllm, partials dropped": ("text", rxllm_runner("text")),
        "rxllm, partials kept": ("text", rxllm_runner("text", keep_partials=True)),
        FLOORS["tools"]: ("tools", floor_tools),
        "rxllm, tool call": ("tools", rxllm_runner("tools")),
        FLOORS["anthropic"]: ("anthropic", floor_anthropic),
        "limit, Anthropic (raw socket)": ("anthropic", limit_anthropic),
        "rxllm Anthropic, partials dropped": ("anthropic", rxllm_runner("anthropic")),
        FLOORS["gemini"]: ("gemini", floor_gemini),
        "limit, Gemini (raw socket)": ("gemini", limit_gemini),
        "rxllm Gemini, partials dropped": ("gemini", rxllm_runner("gemini")),
    }
    try:
        import httpx  # the legacy stack, while it is installed: its floor against httpx2's

        contenders[LEGACY_FLOOR] = ("text", functools.partial(floor_text, lib=httpx))
    except ImportError:
        pass
    if tracing:
        contenders[TELEMETRY_OFF] = ("text", _telemetry_off(rxllm_runner("text")))
        contenders[TRACED] = ("text", _traced(rxllm_runner("text")))
    for name, helper in (("openai SDK create(stream=True)", False), ("openai SDK .stream() helper", True)):
        sdk = openai_sdk_runner(helper)
        if sdk is not None:
            contenders[name] = ("text", sdk)
    return contenders


LEGACY_FLOOR = "floor on httpx 0.28 (legacy)"
FLOORS = {
    "text": "floor (httpx2 iter_lines + json.loads)",
    "tools": "floor, tool call",
    "anthropic": "floor, Anthropic",
    "gemini": "floor, Gemini",
}


def _print_table(title: str, rows: list[dict[str, object]], columns: list[tuple[str, str, int]]) -> None:
    print(f"\n{title}\n")
    header = "  ".join(f"{label:>{width}}" if i else f"{label:{width}}" for i, (label, _, width) in enumerate(columns))
    print(header)
    print("-" * len(header))
    for row in rows:
        print("  ".join(
            f"{row[key]!s:>{width}}" if i else f"{row[key]!s:{width}}" for i, (_, key, width) in enumerate(columns)
        ))


def main() -> int:
    args = _parse_args()
    summary: dict[str, object] = {"chunks": args.chunks, "reps": args.reps}
    if args.only != "calls":
        _streams(args, summary)
    if args.only != "streams":
        _calls(args, summary)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


def _streams(args: argparse.Namespace, summary: dict[str, object]) -> None:
    contenders = _contenders(args.tracing)
    results: dict[str, dict[str, list[float]]] = {name: {"total": [], "cpu": [], "first": []} for name in contenders}
    with BenchServer() as server:
        for _, run in contenders.values():  # warm-up: imports, connections, caches
            run(server.url, min(1000, args.chunks))
        for _ in range(args.reps):
            for name, (_, run) in contenders.items():
                cpu_started = time.process_time()
                total, first, _size = run(server.url, args.chunks)
                results[name]["cpu"].append(time.process_time() - cpu_started)
                results[name]["total"].append(total)
                results[name]["first"].append(first)
        memory = {} if args.no_memory else {
            name: {str(n): peak_memory(run, server.url, n) for n in (max(1, args.chunks // 4), args.chunks)}
            for name, (_, run) in contenders.items()
            if "SDK" not in name
        }

    rows: list[dict[str, object]] = []
    for name, (kind, _) in contenders.items():
        us = statistics.median(results[name]["cpu"]) / args.chunks * 1e6
        floor_us = statistics.median(results[FLOORS[kind]]["cpu"]) / args.chunks * 1e6
        wall_us = statistics.median(results[name]["total"]) / args.chunks * 1e6
        floor_wall_us = statistics.median(results[FLOORS[kind]]["total"]) / args.chunks * 1e6
        mem = memory.get(name, {})
        rows.append(
            {
                "contender": name,
                "kind": kind,
                "cpu_us_per_chunk": round(us, 2),
                "ratio_to_floor": round(us / floor_us, 2),
                "us_per_chunk": round(wall_us, 2),
                "wall_ratio_to_floor": round(wall_us / floor_wall_us, 2),
                "wall_ratio": f"{wall_us / floor_wall_us:.2f}×",
                "first_item_ms": round(statistics.median(results[name]["first"]) * 1e3, 2),
                "peak_mib": {k: round(v / 2**20, 2) for k, v in mem.items()},
                "ratio": f"{us / floor_us:.2f}×",
                "mem": " → ".join(f"{v / 2**20:.2f}" for v in mem.values()) if mem else "-",
            }
        )
    _print_table(
        f"{args.chunks} chunks per stream, {args.reps} interleaved reps, medians; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpus",
        rows,
        [("contender", "contender", 40), ("CPU µs/chunk", "cpu_us_per_chunk", 12), ("vs floor", "ratio", 9),
         ("wall µs/chunk", "us_per_chunk", 13), ("wall vs floor", "wall_ratio", 13),
         ("1st item ms", "first_item_ms", 12), ("peak MiB (n/4 → n)", "mem", 18)],
    )
    summary["rows"] = [{k: v for k, v in row.items() if k not in ("ratio", "wall_ratio", "mem")} for row in rows]
    if args.tracing:
        by_name = {row["contender"]: row["cpu_us_per_chunk"] for row in rows}
        off, on = by_name[TELEMETRY_OFF], by_name[TRACED]
        difference = (on / off - 1) * 100  # type: ignore[operator]
        summary["tracing_cost_percent"] = round(difference, 2)
        print(f"\ntracing on vs off: {difference:+.2f} % per chunk (target: under 3 %)")


def _calls(args: argparse.Namespace, summary: dict[str, object]) -> None:
    short = short_calls(args.small, args.small_reps)
    _print_table(
        f"short calls: CPU ms per {short['chunks']}-chunk call (this process, every thread), a reused client, "
        f"{short['reps']} interleaved reps, medians (target: rxllm at most +0.2 ms over the floor)",
        short["rows"],
        [("contender", "contender", 40), ("CPU ms/call", "cpu_ms_per_call", 11),
         ("CPU over floor", "cpu_over_floor_ms", 14), ("wall ms/call", "wall_ms_per_call", 12)],
    )
    summary["short_calls"] = short

    sequential = sequential_calls(args.calls, args.small, max(1, args.reps))
    _print_table(
        f"{args.calls} sequential calls per session over loopback TLS, {args.small} chunks each, "
        f"{max(1, args.reps)} sessions each, interleaved; connections = accepted by the server per session",
        sequential,  # type: ignore[arg-type]
        [("contender", "contender", 40), ("connections", "connections_per_session", 11),
         ("median ms/call", "median_ms_per_call", 14)],
    )
    summary["sequential_tls"] = sequential

    first = first_partial(args.small, args.small_reps)
    print(
        f"\ntime to first partial, {first['chunks']}-chunk stream, {first['reps']} interleaved reps, medians: "
        f"floor {first['floor_ms']} ms, rxllm {first['rxllm_ms']} ms, "
        f"difference {first['rxllm_minus_floor_ms']:+} ms (target: at most +0.5 ms)"
    )
    summary["first_partial"] = first

    runtime = runtime_cost(args.small_reps)
    _print_table(
        f"the order-A17 turn (2 model calls, 1 tool), {runtime['reps']} interleaved reps, medians; "
        "overhead = (turn - 2 bare calls) / 2 (targets, CPU: agent at most 0.3 ms, service at most 0.2 ms)",
        runtime["rows"],
        [("contender", "contender", 40), ("median ms", "median_ms", 10),
         ("overhead ms/call", "overhead_ms_per_model_call", 16), ("CPU ms", "median_cpu_ms", 8),
         ("CPU overhead ms/call", "cpu_overhead_ms_per_model_call", 20)],
    )
    summary["runtime_cost"] = runtime


if __name__ == "__main__":
    raise SystemExit(main())
