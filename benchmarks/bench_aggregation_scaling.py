"""Aggregation cost against the number of tool calls: CPU time for n and 4n calls, and their ratio.

Each call streams in two fragments (``{"x":`` then ``1}``) and the stream asks for completed calls
after every chunk, as the fine-grained event stream does. Linear aggregation gives a ratio near 4;
a scan of every call per chunk gives 16. The suite checks the same growth on line counts
(``tests/test_aggregation.py``), which are exact on a loaded machine.

    python benchmarks/bench_aggregation_scaling.py [--calls 10000] [--reps 3]
"""

from __future__ import annotations

import argparse
import time

from rxllm import Chunk, StreamAggregator, ToolCallFragment


def cpu_seconds(n: int) -> float:
    first = [ToolCallFragment(i, id=f"c{i}", name="f", arguments_delta='{"x":') for i in range(n)]
    last = [ToolCallFragment(i, arguments_delta="1}") for i in range(n)]
    chunks = [Chunk(tool_call_fragments=(f,)) for f in first + last]
    started = time.process_time()
    aggregator = StreamAggregator()
    for chunk in chunks:
        aggregator.accept(chunk)
        aggregator.take_completed_calls()
    final = aggregator.finish()
    elapsed = time.process_time() - started
    assert len(final.function_calls()) == n
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    small = min(cpu_seconds(args.calls) for _ in range(args.reps))
    large = min(cpu_seconds(4 * args.calls) for _ in range(args.reps))
    print(f"{args.calls:>7} calls: {small * 1000:8.1f} ms CPU")
    print(f"{4 * args.calls:>7} calls: {large * 1000:8.1f} ms CPU")
    print(f"ratio (linear ~4, quadratic ~16): {large / small:.2f}")


if __name__ == "__main__":
    main()
