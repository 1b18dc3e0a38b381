"""Instructions per short call, client side, counted with callgrind: rxllm against the floor (repeatable under load).

The contenders of ``bench_stream.py``'s short-call section (``_turns.short_call_contenders``): a
``--small``-chunk OpenAI chat stream per call, sequential calls on a reused client, read from the
loopback server of ``_server.py`` (a process outside valgrind, so only the client is counted):

- the floor: one reused ``httpx2.Client``, ``iter_lines`` + ``json.loads`` + join;
- rxllm on its I/O thread (the default) and with ``scheduler=ImmediateScheduler()``, one reused
  ``OpenAiChatModel`` each, ``generate_content(stream=True).pipe(ops.to_list()).run()``.

callgrind counts every thread of the process. The count per call is
``(Ir(warm-up + N calls) - Ir(warm-up)) / N``, so start-up, imports and the client's set-up cancel
out; the figure that matters is rxllm's count minus the floor's (what rxllm adds to a short call).
Instructions leave out cache misses, waits and the hand-off between threads, so compare them with
each other, and read the CPU milliseconds in ``bench_stream.py`` beside them.

Run (needs ``valgrind``)::

    .venv/bin/python benchmarks/call_instructions.py --calls 50

``--run NAME URL N`` is the inner run the script starts under callgrind.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _callgrind import instructions

NAMES = ["floor (httpx2.Client, reused)", "rxllm (I/O thread, the default)", "rxllm (scheduler=ImmediateScheduler())"]
WARMUP = 20


def _run(name: str, url: str, n: int) -> None:
    import httpx2
    from _turns import short_call_contenders

    with httpx2.Client(timeout=60) as client:
        call = short_call_contenders(url, client)[name]
        for _ in range(WARMUP):
            call()
        gc.collect()
        for _ in range(n):
            call()


def _instructions(name: str, url: str, n: int) -> int:
    return instructions(__file__, name, url, str(n))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50, help="counted calls (default 50)")
    parser.add_argument("--small", type=int, default=20, help="chunks per call (default 20)")
    parser.add_argument("--run", nargs=3, metavar=("NAME", "URL", "N"))
    args = parser.parse_args()
    if args.run:
        _run(args.run[0], args.run[1], int(args.run[2]))
        return 0
    from _server import BenchServer

    per_call: dict[str, float] = {}
    with BenchServer() as server:
        url = f"{server.url}/text/{args.small}"
        for name in NAMES:
            per_call[name] = (_instructions(name, url, args.calls) - _instructions(name, url, 0)) / args.calls
            over = per_call[name] - per_call[NAMES[0]]
            print(f"{name:40} {per_call[name]:12,.0f} instructions per {args.small}-chunk call"
                  f"  ({over:+,.0f} over the floor, {per_call[name] / per_call[NAMES[0]]:.2f}×)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
