"""Instructions per chunk of a whole streamed call, client side, counted with callgrind: rxllm against the floors.

The same contenders as ``bench_stream.py`` (every floor and every rxllm row) read the same bodies
from the same loopback server, here in a server process that runs outside valgrind, so only the
client is counted: httpx/httpcore/h11 reading the body, SSE decoding, parsing, the aggregator,
the Rx delivery to the subscriber, the final. The count per chunk is
``(Ir(N chunks) - Ir(50 chunks)) / (N - 50)``: start-up, imports, the client's set-up and one
warm-up stream cancel out. Unlike wall-clock time, the counts repeat on a loaded machine (they
leave out cache misses and waits, so compare them with each other, not with µs).

Run (needs ``valgrind``; about a minute per contender)::

    .venv/bin/python benchmarks/stream_instructions.py --chunks 2050

``--run NAME URL N`` is the inner run the script starts under callgrind.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _callgrind import instructions

FLOOR_OF = {
    "rxllm, partials dropped": "floor (httpx iter_lines + json.loads)",
    "rxllm, partials kept": "floor (httpx iter_lines + json.loads)",
    "rxllm, tool call": "floor, tool call",
    "rxllm Anthropic, partials dropped": "floor, Anthropic",
    "rxllm Gemini, partials dropped": "floor, Gemini",
    "limit (raw socket + json.loads)": "floor (httpx iter_lines + json.loads)",
    "limit, Anthropic (raw socket)": "floor, Anthropic",
    "limit, Gemini (raw socket)": "floor, Gemini",
}
BASE = 50


def _runners() -> dict[str, object]:
    from _contenders import (
        floor_anthropic,
        floor_gemini,
        floor_text,
        floor_tools,
        limit_anthropic,
        limit_gemini,
        limit_text,
        rxllm_runner,
    )

    return {
        "floor (httpx iter_lines + json.loads)": floor_text,
        "rxllm, partials dropped": rxllm_runner("text"),
        "rxllm, partials kept": rxllm_runner("text", keep_partials=True),
        "floor, tool call": floor_tools,
        "rxllm, tool call": rxllm_runner("tools"),
        "floor, Anthropic": floor_anthropic,
        "rxllm Anthropic, partials dropped": rxllm_runner("anthropic"),
        "floor, Gemini": floor_gemini,
        "rxllm Gemini, partials dropped": rxllm_runner("gemini"),
        "limit (raw socket + json.loads)": limit_text,
        "limit, Anthropic (raw socket)": limit_anthropic,
        "limit, Gemini (raw socket)": limit_gemini,
    }


def _run(name: str, url: str, n: int) -> None:
    run = _runners()[name]
    run(url, BASE)  # type: ignore[operator]  # warm-up: imports, the connection pool, caches
    run(url, n)  # type: ignore[operator]


def _instructions(name: str, url: str, n: int) -> int:
    return instructions(__file__, name, url, str(n))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=2050, help="chunks of the measured stream (default 2050)")
    parser.add_argument("--only", action="append", help="a contender's name (repeatable; default: all)")
    parser.add_argument("--run", nargs=3, metavar=("NAME", "URL", "N"))
    args = parser.parse_args()
    if args.run:
        _run(args.run[0], args.run[1], int(args.run[2]))
        return 0
    from _server import BenchServer

    names = args.only or list(_runners())
    per_chunk: dict[str, float] = {}
    with BenchServer() as server:
        for name in names:
            counted = _instructions(name, server.url, args.chunks) - _instructions(name, server.url, BASE)
            per_chunk[name] = counted / (args.chunks - BASE)
            floor = per_chunk.get(FLOOR_OF.get(name, ""))
            ratio = f"  {per_chunk[name] / floor:.2f}× its floor" if floor else ""
            print(f"{name:40} {per_chunk[name]:10,.0f} instructions per chunk{ratio}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
