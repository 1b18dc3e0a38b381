"""Instructions per order-A17 turn over loopback, counted with callgrind in the client process only.

The turn of ``runtime_cost`` in ``_turns.py`` (the same ``OpenAiChatModel`` on ``_server.py``'s
``/a17`` path, default transport and tool scheduler), three runs each ``N`` times after a warm-up:
the 2 bare model calls, the agent turn and the service turn. The server runs in its own process,
started here outside valgrind; only the client runs under ``valgrind --tool=callgrind
--trace-children=no`` (every thread of it). The count per turn is ``(Ir(N turns) - Ir(0 turns)) /
N``; the overhead per model call is ``(turn - bare) / 2``. The garbage collector is off while
counting (as in ``runtime_instructions.py``). Thread hand-offs make these counts move more than the
in-process ones (a few thousand instructions per turn).

Run (needs ``valgrind``)::

    PYTHONHASHSEED=0 .venv/bin/python benchmarks/loopback_instructions.py --turns 30 [--only service]

``--run URL WHAT N`` is the inner run started under callgrind.
"""

from __future__ import annotations

import argparse
import gc
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

WARMUP = 20


def _contenders(url: str) -> dict[str, Callable[[], None]]:
    from _turns import a17_contenders

    from rxllm import RetryPolicy
    from rxllm.providers.openai import OpenAiChatModel

    model = OpenAiChatModel("bench", base_url=f"{url}/a17", api_key="bench", retry_policy=RetryPolicy.never())
    return a17_contenders(model)


def _run(url: str, what: str, n: int) -> None:
    gc.collect()
    gc.disable()
    run = _contenders(url)[what]
    prepare: Callable[[], None] | None = getattr(run, "prepare", None)
    if prepare is not None:
        for _ in range(WARMUP + n):
            prepare()
    for _ in range(WARMUP):
        run()
    for _ in range(n):
        run()


def _instructions(url: str, what: str, n: int) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--trace-children=no", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--run", url, what, str(n)],
        capture_output=True, text=True, check=True,
    ).stderr
    match = re.search(r"Collected\s*:\s*(\d+)", out)
    assert match, out[-2000:]
    return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--only", choices=["bare", "agent", "service"], action="append")
    parser.add_argument("--run", nargs=3, metavar=("URL", "WHAT", "N"))
    args = parser.parse_args()
    if args.run:
        _run(args.run[0], args.run[1], int(args.run[2]))
        return 0
    from _server import BenchServer

    wanted = ["bare", *(w for w in (args.only or ["agent", "service"]) if w != "bare")]
    with BenchServer() as server:
        per_turn = {
            what: (_instructions(server.url, what, args.turns) - _instructions(server.url, what, 0)) / args.turns
            for what in wanted
        }
    print(f"over loopback, bare 2 model calls: {per_turn['bare']:,.0f} instructions")
    for what in wanted[1:]:
        overhead = (per_turn[what] - per_turn["bare"]) / 2
        print(f"{what:7} turn: {per_turn[what]:,.0f} instructions, {overhead:,.0f} per model call over bare")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
