"""Per-turn cost of the request contents: the full builder against the incremental cache, in one run.

Each model call of an ``LlmAgent`` turns the session's events into the request's contents
(``rxllm.agents._flows.contents.request_contents``, then ``safe_content`` on each). The full
builder walks the whole history every call; the incremental cache
(``rxllm.agents._flows.contents_cache``) walks only the events appended since its last call.

A session of N events (turns of: a user question, a model call of a tool, the tool's answer, the
model's reply; every tenth turn another agent speaks, and with ``--compaction`` a sliding-window
summary every ten turns) grows by one turn (four events) per step; one step is timed: the contents
of one model call. Both builders are checked for the same contents at every step.

Figures: CPU microseconds per call (``time.process_time``, the best of ``--reps``, collector off)
and Python function calls per call (``cProfile``, deterministic), for N = 10, 100, 1,000; with
``--instructions`` (needs ``valgrind``) also the instructions per call callgrind counts, load-
independent: ``(Ir(set-up + K calls) - Ir(set-up)) / K``, the session growing by one turn per call.

Run::

    .venv/bin/python benchmarks/bench_contents.py
    .venv/bin/python benchmarks/bench_contents.py --compaction --instructions

``--run NAME SIZE K COMPACTION`` is the inner run the script starts under callgrind.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rxllm import Content, FunctionCall, FunctionResponse, Part
from rxllm._tools._json_safe import safe_content
from rxllm.agents import Event, EventActions, EventCompaction
from rxllm.agents._flows.contents import request_contents

try:
    from rxllm.agents._flows.contents_cache import IncrementalContents
except ImportError:  # the branch before the cache: the full builder only
    IncrementalContents = None  # type: ignore[assignment,misc]


def turn(n: int, clock: list[float]) -> list[Event]:
    def stamp() -> float:
        clock[0] += 1.0
        return clock[0]

    inv = f"inv{n}"
    call = FunctionCall(id=f"call{n}", name="lookup", args={"q": n})
    events = [
        Event(author="user", invocation_id=inv, timestamp=stamp(),
              content=Content(role="user", parts=(Part.from_text(f"question {n}"),))),
        Event(author="bot", invocation_id=inv, timestamp=stamp(),
              content=Content(role="model", parts=(Part(function_call=call),))),
        Event(author="bot", invocation_id=inv, timestamp=stamp(),
              content=Content(role="user", parts=(Part(function_response=FunctionResponse(
                  id=f"call{n}", name="lookup", response={"result": n})),))),
        Event(author="helper" if n % 10 == 9 else "bot", invocation_id=inv, timestamp=stamp(),
              content=Content(role="model", parts=(Part.from_text(f"answer {n}"),))),
    ]
    return events


def summary(start: float, end: float, n: int, clock: list[float]) -> Event:
    clock[0] += 1.0
    content = Content(role="model", parts=(Part.from_text(f"summary {n}"),))
    return Event(author="user", invocation_id=f"c{n}", timestamp=clock[0], actions=EventActions(
        compaction=EventCompaction(start_timestamp=start, end_timestamp=end, compacted_content=content)))


def history(turns: int, compaction: bool) -> list[Event]:
    clock = [0.0]
    events: list[Event] = []
    for n in range(turns):
        events.extend(turn(n, clock))
        if compaction and n % 10 == 9:
            events.append(summary(events[-44 if len(events) > 44 else 0].timestamp, events[-1].timestamp, n, clock))
    return events


def full(events: tuple[Event, ...]) -> tuple[Content, ...]:
    return tuple(map(safe_content, request_contents(events, agent_name="bot", branch=None)))


def measure(size: int, compaction: bool, reps: int) -> dict[str, tuple[float, float]]:
    turns = max(1, size // 4)
    base = history(turns + 1, compaction)
    prefix, step = tuple(base[: len(base) - 4]), tuple(base)
    builders: dict[str, Callable[[], Callable[[tuple[Event, ...]], tuple[Content, ...]]]] = {"full": lambda: full}
    if IncrementalContents is not None:
        def cached() -> Callable[[tuple[Event, ...]], tuple[Content, ...]]:
            builder = IncrementalContents("bot", None, "default")
            builder.contents(prefix)  # the cache as the previous model call left it
            return builder.contents
        builders["cached"] = cached
    expected = full(step)
    results: dict[str, tuple[float, float]] = {}
    for name, make in builders.items():
        best = float("inf")
        gc.disable()
        for _ in range(reps):
            build = make()
            start = time.process_time()
            got = build(step)
            best = min(best, time.process_time() - start)
            assert got == expected, name
        build = make()
        profile = cProfile.Profile()
        profile.enable()
        build(step)
        profile.disable()
        gc.enable()
        calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
        results[name] = (best * 1e6, float(calls))
    return results


def run(name: str, size: int, steps: int, compaction: bool) -> None:
    """The inner run: a session of ``size`` events, then ``steps`` calls, each one turn more."""
    turns = max(1, size // 4)
    base = history(turns + steps, compaction)
    # a call ends each turn (as a model call of a flow comes after the tool's answer is stored)
    ends = [i + 1 for i, e in enumerate(base) if e.text().startswith("answer") and i + 1 >= 4 * turns][: steps + 1]
    if name == "full":
        build: Callable[[tuple[Event, ...]], tuple[Content, ...]] = full
    else:
        build = IncrementalContents("bot", None, "default").contents
    build(tuple(base[: ends[0]]))  # the set-up: the cache as the previous model call left it
    for end in ends[1 : steps + 1] if steps else ():
        build(tuple(base[:end]))


def instructions_per_call(name: str, size: int, compaction: bool, steps: int = 5) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _callgrind import instructions

    flag = "1" if compaction else "0"
    base = instructions(__file__, name, str(size), "0", flag)
    return (instructions(__file__, name, str(size), str(steps), flag) - base) / steps


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--run":
        _, _, name, size, steps, compaction = sys.argv
        run(name, int(size), int(steps), compaction == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--compaction", action="store_true", help="a sliding-window summary every ten turns")
    parser.add_argument("--instructions", action="store_true", help="instructions per call under callgrind too")
    args = parser.parse_args()
    print(f"request contents per model call{' (with compaction summaries)' if args.compaction else ''}")
    header = ("events", "full µs", "calls", "cached µs", "calls", "CPU ratio", "calls ratio")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (7, 9, 7, 10, 7, 10, 12), strict=True)))
    for size in (10, 100, 1000):
        r = measure(size, args.compaction, args.reps)
        f_us, f_calls = r["full"]
        if "cached" in r:
            c_us, c_calls = r["cached"]
            print(f"{size:>7} {f_us:>9.1f} {f_calls:>7.0f} {c_us:>10.1f} {c_calls:>7.0f} "
                  f"{c_us / f_us:>9.3f}x {c_calls / f_calls:>11.3f}x")
        else:
            print(f"{size:>7} {f_us:>9.1f} {f_calls:>7.0f}")
    if args.instructions:
        print("instructions per call (callgrind)")
        for size in (10, 100, 1000):
            names = ["full"] + (["cached"] if IncrementalContents is not None else [])
            counts = {name: instructions_per_call(name, size, args.compaction) for name in names}
            line = "  ".join(f"{name} {count:,.0f}" for name, count in counts.items())
            ratio = f"  ratio {counts['cached'] / counts['full']:.4f}x" if "cached" in counts else ""
            print(f"{size:>7}  {line}{ratio}")


if __name__ == "__main__":
    main()
