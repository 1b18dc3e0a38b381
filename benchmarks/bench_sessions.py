"""Session stores: append latency, get-with-N-events latency, and concurrent appends/s on PostgreSQL.

Run (from the repository root):
``.venv/bin/python benchmarks/bench_sessions.py --appends 1000 --events 500 --writers 8 --writer-appends 500``

For each store (memory, SQLite in a temp file, PostgreSQL started from the machine's binaries on
127.0.0.1 with fsync on, as ``tests/pg_server.py`` does for the tests):

* **append**: ``append_event(...).run()`` of one event with a one-key state delta, one after the
  other on one session; median and p99 latency in µs.
* **get**: ``get_session(...).run()`` of a session holding ``--events`` events; median and p99.

Then ``--writers`` OS processes append ``--writer-appends`` events each to PostgreSQL at the same
time, released together: aggregate appends/s, once with each writer on its own session and once
with all of them on one session (every append then waits for the session row's lock).
Figures go to stdout and to ``--json`` (default ``benchmarks/results/bench_sessions.json``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from pg_server import LocalPostgres, postgres_binaries  # noqa: E402

from rxllm import Content, Part  # noqa: E402
from rxllm.agents import (  # noqa: E402
    BaseSessionService,
    Event,
    EventActions,
    InMemorySessionService,
    PostgresSessionService,
    SqliteSessionService,
)


def event(i: int, author: str = "bot") -> Event:
    return Event(
        author=author,
        content=Content(role="model", parts=(Part.from_text(f"Answer number {i}: the order shipped on Tuesday."),)),
        actions=EventActions(state_delta={"turn": i}),
    )


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_store(name: str, service: BaseSessionService, appends: int, events: int, gets: int) -> dict[str, Any]:
    session = service.create_session("bench", "u", session_id="append").run()
    latencies = []
    for i in range(appends):
        started = time.perf_counter()
        service.append_event(session, event(i)).run()
        latencies.append((time.perf_counter() - started) * 1e6)
    full = service.create_session("bench", "u", session_id="full").run()
    for i in range(events):
        service.append_event(full, event(i)).run()
    get_latencies = []
    for _ in range(gets):
        started = time.perf_counter()
        got = service.get_session("bench", "u", "full").run()
        get_latencies.append((time.perf_counter() - started) * 1e6)
        assert len(got.events) == events
    return {
        "store": name,
        "append_median_us": statistics.median(latencies),
        "append_p99_us": percentile(latencies, 0.99),
        "get_events": events,
        "get_median_us": statistics.median(get_latencies),
        "get_p99_us": percentile(get_latencies, 0.99),
    }


def _writer(dsn: str, session_id: str, writer: int, count: int, ready: Any, go: Any) -> None:
    service = PostgresSessionService(dsn, min_size=1, max_size=1)
    session = service.get_session("bench", "u", session_id).run()
    service.list_sessions("bench", "u").run()  # connect and check the schema before the clock starts
    ready.release()
    go.wait()
    for i in range(count):
        service.append_event(session, event(i, author=f"w{writer}")).run()
    service.close()


def concurrent_appends(dsn: str, writers: int, count: int, shared: bool) -> float:
    service = PostgresSessionService(dsn)
    ids = ["shared"] if shared else [f"own-{shared}-{w}" for w in range(writers)]
    for sid in ids:
        service.create_session("bench", "u", session_id=f"{sid}-{count}-{writers}").run()
    context = multiprocessing.get_context("spawn")
    ready, go = context.Semaphore(0), context.Event()
    processes = [
        context.Process(
            target=_writer,
            args=(dsn, f"{ids[0 if shared else w]}-{count}-{writers}", w, count, ready, go),
        )
        for w in range(writers)
    ]
    for p in processes:
        p.start()
    for _ in processes:
        ready.acquire()
    started = time.perf_counter()
    go.set()
    for p in processes:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer failed with exit code {p.exitcode}")
    elapsed = time.perf_counter() - started
    stored = sum(len(service.get_session("bench", "u", f"{sid}-{count}-{writers}").run().events) for sid in ids)
    service.close()
    assert stored == writers * count, (stored, writers * count)
    return writers * count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=1000, help="sequential appends timed per store")
    parser.add_argument("--events", type=int, default=500, help="events in the session that get_session reads")
    parser.add_argument("--gets", type=int, default=50, help="get_session calls timed per store")
    parser.add_argument("--writers", type=int, default=8, help="concurrent writer processes on PostgreSQL")
    parser.add_argument("--writer-appends", type=int, default=500, help="appends per writer process")
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_sessions.json"
    )
    args = parser.parse_args()
    results: dict[str, Any] = {"stores": [], "concurrent": []}
    with tempfile.TemporaryDirectory() as tmp:
        stores: list[tuple[str, BaseSessionService]] = [
            ("memory", InMemorySessionService()),
            ("sqlite", SqliteSessionService(Path(tmp) / "bench.db")),
        ]
        why = postgres_binaries()
        server = LocalPostgres(fsync=True).start() if why is None else None
        try:
            if server is not None:
                stores.append(("postgres", PostgresSessionService(server.dsn)))
            else:
                print(f"PostgreSQL skipped: {why}", file=sys.stderr)
            print(f"{'store':<10}{'append median µs':>18}{'append p99 µs':>15}{'get median µs':>16}{'get p99 µs':>12}")
            for name, service in stores:
                row = measure_store(name, service, args.appends, args.events, args.gets)
                results["stores"].append(row)
                print(
                    f"{name:<10}{row['append_median_us']:>18.0f}{row['append_p99_us']:>15.0f}"
                    f"{row['get_median_us']:>16.0f}{row['get_p99_us']:>12.0f}   (get of {args.events} events)"
                )
                close = getattr(service, "close", None)
                if close is not None:
                    close()
            if server is not None:
                for shared in (False, True):
                    rate = concurrent_appends(server.dsn, args.writers, args.writer_appends, shared)
                    label = "one shared session" if shared else "a session each"
                    results["concurrent"].append(
                        {"writers": args.writers, "appends_each": args.writer_appends, "shared": shared,
                         "appends_per_s": rate}
                    )
                    print(f"postgres: {args.writers} writer processes, {label}: {rate:,.0f} appends/s")
        finally:
            if server is not None:
                server.stop()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
