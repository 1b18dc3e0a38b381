"""What the garbage collector costs an order-A17 turn over loopback: objects left to it, its time.

The turn of ``runtime_cost`` in ``_turns.py`` (the same ``OpenAiChatModel`` on ``_server.py``'s
``/a17`` path, default transport and tool scheduler; the runner keeps every session, as an
application does), three contenders run ``N`` times each after a warm-up, one after the other:

- **left to the collector per turn**: one turn with the collector off, then ``gc.collect()``;
  what it returns is what reference counting could not free (a reference cycle);
- **collections per turn** and **collector ms per turn** (by generation, timed with
  ``gc.callbacks`` on the thread that collects) over the ``N`` turns with the collector on;
- **CPU ms per turn**: ``time.process_time()`` over the ``N`` turns (every thread, collections
  included: a mean, not a median, so the full collections a run of turns sets off count).

The overhead of the agent and the service per model call is ``(turn - bare) / 2``, as in
``make bench``. Run::

    .venv/bin/python benchmarks/collector_cost.py --turns 300
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

WARMUP = 20


class _Collections:
    """Collections and their thread time, by generation, while installed in ``gc.callbacks``."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            generation = info["generation"]
            self.count[generation] += 1
            self.seconds[generation] += time.thread_time() - self._started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    from _server import BenchServer
    from loopback_instructions import _contenders

    turns = args.turns
    with BenchServer() as server:
        contenders = _contenders(server.url)
        results: dict[str, dict[str, Any]] = {}
        for name, run in contenders.items():
            prepare = getattr(run, "prepare", None)
            for _ in range(WARMUP + turns + 1):  # every session exists before the turns (not the turn's work)
                if prepare is not None:
                    prepare()
            for _ in range(WARMUP):
                run()
            gc.collect()
            gc.disable()
            try:
                run()
                left = gc.collect()
            finally:
                gc.enable()
            collections = _Collections()
            gc.callbacks.append(collections)
            try:
                started = time.process_time()
                for _ in range(turns):
                    run()
                cpu = (time.process_time() - started) / turns
            finally:
                gc.callbacks.remove(collections)
            results[name] = {"left": left, "cpu_ms": cpu * 1e3, "collections": collections}
    print(f"order-A17 turn over loopback, {turns} turns each (the runner keeps its sessions); "
          f"python {sys.version.split()[0]}")
    print(f"{'contender':9} {'left to the collector':>22} {'collections per turn (gen 0/1/2)':>34} "
          f"{'collector ms/turn':>18} {'CPU ms/turn':>12}")
    for name, row in results.items():
        found: _Collections = row["collections"]
        per_turn = "/".join(f"{count / turns:.3f}" for count in found.count)
        print(f"{name:9} {row['left']:>22} {per_turn:>34} {sum(found.seconds) / turns * 1e3:>18.3f} "
              f"{row['cpu_ms']:>12.3f}")
    bare = results["bare"]["cpu_ms"]
    for name in ("agent", "service"):
        overhead = (results[name]["cpu_ms"] - bare) / 2
        print(f"{name}: {overhead:.3f} CPU ms per model call over bare (mean, collections included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
