"""Partials kept on an application-sized heap: CPU per chunk against the floor, the collector's share.

``make bench`` runs in a nearly empty interpreter, where the garbage collector's full passes are
cheap. An application has its libraries' objects alive (tens of thousands of classes, functions
and dicts), and every full pass walks all of them. This benchmark first imports what a typical
rxllm application imports -- fastapi, uvicorn, openai, google-genai, the OpenTelemetry SDK,
``rxllm.agents`` and ``rxllm.service`` (whichever are installed; the table's header names them and
the number of GC-tracked objects alive) -- then streams the same body through the floor
(httpx2 ``iter_lines`` + ``json.loads`` + join) and through rxllm with every partial kept (and
dropped), interleaved rep by rep, from the loopback server of ``_server.py``.

Columns: CPU µs per chunk of this process (``time.process_time``; the server is another process)
and its ratio to the floor's in the same run, wall µs per chunk beside it, the collector's full
passes per stream and the seconds they took (from ``gc.callbacks``), and the GC-tracked objects
each kept partial keeps alive (``gc.get_objects()`` before and after, a full collection first).

Run::

    .venv/bin/python benchmarks/bench_kept.py --chunks 20000 --reps 5
    .venv/bin/python benchmarks/bench_kept.py --bare     # the same without the application's imports
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

APPLICATION = ["fastapi", "uvicorn", "openai", "google.genai", "opentelemetry.sdk.trace",
               "opentelemetry.sdk.metrics", "rxllm.agents", "rxllm.service"]


class _Collections:
    """Counts the collector's full passes and their time (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.full = 0
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.full += 1
            self.seconds += time.perf_counter() - self._started


def tracked_per_partial(n: int = 20_000) -> float:
    """GC-tracked objects alive per kept partial, through the streams' own per-chunk step."""
    from rxllm import Chunk, LlmResponse, StreamAggregator
    from rxllm._models.sse_chat_model import _emit_partials, _on_chunk

    aggregator = StreamAggregator()
    kept: list[LlmResponse] = []
    subscriber = SimpleNamespace(on_next=kept.append)  # _on_chunk takes the subscriber's observer
    on_chunk = _on_chunk(_emit_partials, aggregator, subscriber, None)  # type: ignore[arg-type]
    chunks = [Chunk(text_delta=f"tok{i} ") for i in range(n)]  # built before counting
    for chunk in chunks[:10]:  # warm-up: whatever the first partials load once
        on_chunk(chunk)
    del kept[:]
    gc.collect()
    before = len(gc.get_objects())
    for chunk in chunks:
        on_chunk(chunk)
    gc.collect()
    after = len(gc.get_objects())
    assert len(kept) == n
    return (after - before) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks per stream (default 20000)")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions (default 5)")
    parser.add_argument("--bare", action="store_true", help="skip the application's imports")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_kept.json")
    args = parser.parse_args()

    imported = []
    if not args.bare:
        for name in APPLICATION:
            try:
                importlib.import_module(name)
                imported.append(name)
            except ImportError:
                pass
    from _contenders import floor_text, rxllm_runner
    from _server import BenchServer

    gc.collect()
    heap = len(gc.get_objects())
    contenders = {
        "floor (httpx2 iter_lines + json.loads)": floor_text,
        "rxllm, partials kept": rxllm_runner("text", keep_partials=True),
        "rxllm, partials dropped": rxllm_runner("text"),
    }
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    passes: dict[str, list[tuple[int, float]]] = {name: [] for name in contenders}
    with BenchServer() as server:
        for run in contenders.values():
            run(server.url, min(1000, args.chunks))
        for _ in range(args.reps):
            for name, run in contenders.items():
                counter = _Collections()
                gc.callbacks.append(counter)
                try:
                    started = time.process_time()
                    elapsed, _first, _size = run(server.url, args.chunks)
                    cpu[name].append(time.process_time() - started)
                finally:
                    gc.callbacks.remove(counter)
                wall[name].append(elapsed)
                passes[name].append((counter.full, counter.seconds))
    per_partial = tracked_per_partial()

    floor = "floor (httpx2 iter_lines + json.loads)"
    floor_cpu = statistics.median(cpu[floor])
    print(f"\n{args.chunks} chunks per stream, {args.reps} interleaved reps, medians; python "
          f"{sys.version.split()[0]}; heap: {heap:,} GC-tracked objects; imported: "
          f"{', '.join(imported) or 'nothing (--bare)'}\n")
    header = f"{'contender':40} {'CPU µs/chunk':>12} {'vs floor':>9} {'wall µs/chunk':>13} {'full GCs':>9} {'GC s':>6}"
    print(header)
    print("-" * len(header))
    rows = []
    for name in contenders:
        c = statistics.median(cpu[name])
        w = statistics.median(wall[name])
        full = statistics.median(p[0] for p in passes[name])
        seconds = statistics.median(p[1] for p in passes[name])
        rows.append({"contender": name, "cpu_us_per_chunk": round(c / args.chunks * 1e6, 2),
                     "cpu_ratio_to_floor": round(c / floor_cpu, 2),
                     "wall_us_per_chunk": round(w / args.chunks * 1e6, 2),
                     "full_collections": full, "full_collection_seconds": round(seconds, 3)})
        print(f"{name:40} {c / args.chunks * 1e6:12.2f} {c / floor_cpu:8.2f}× {w / args.chunks * 1e6:13.2f} "
              f"{full:9} {seconds:6.2f}")
    print(f"\nGC-tracked objects kept alive per kept partial: {per_partial:.2f} (target: at most 2)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"chunks": args.chunks, "reps": args.reps, "heap_objects": heap,
                                     "imported": imported, "rows": rows, "tracked_per_partial": per_partial},
                                    indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
