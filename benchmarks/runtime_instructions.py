"""Instructions per order-A17 turn of rxllm's own runtime, counted with callgrind (repeatable under load).

The order-A17 turn (a text delta and a ``get_order`` call in the first model call, the tool, the
answer in the second; see ``_turns.py``) runs against an in-process model that emits the turn's
responses synchronously on the subscribing thread (no network, no transport): what is counted is
the runtime's own work. Three runs, each ``N`` times after a warm-up:

- **bare**: the two model calls, subscribed directly (``ops.to_list()``);
- **agent**: the turn through an ``LlmAgent`` in an ``InMemoryRunner`` (SSE mode, a fresh session
  per turn, created outside the count as in ``bench_stream.py``);
- **service**: the turn through an ``AiService``.

Every run is subscribed the way ``bench_stream.py`` does it, ``.pipe(ops.to_list()).run()`` (which
hands reactivex's ``NewThreadScheduler`` to the subscription). Tools run on a scheduler that runs
them at once on the calling thread, so the count does not depend on how threads interleave; the
hop to the tool pool is measured in wall time by ``bench_stream.py``. The count per turn is
``(Ir(N turns) - Ir(0 turns)) / N``, so start-up and imports cancel out; the overhead per model
call is ``(turn - bare) / 2``. The garbage collector is off while counting: its collections come in
lumps (a full one every few hundred turns here) that a run of N turns may or may not include, which
made counts of the same code differ by a million instructions per turn; ``--time`` runs with it on.

Run (needs ``valgrind``)::

    .venv/bin/python benchmarks/runtime_instructions.py --turns 200

``--run WHAT N`` is the inner run the script starts under callgrind; ``--time`` prints CPU
milliseconds per turn instead (no valgrind; noisy on a loaded machine).
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

from _callgrind import instructions

WARMUP = 20


def _contenders() -> dict[str, Callable[[], None]]:
    import reactivex
    from _turns import a17_contenders
    from reactivex import abc as rx_abc
    from reactivex.disposable import Disposable
    from reactivex.scheduler import ImmediateScheduler

    from rxllm import BaseLlm, Chunk, LlmRequest, LlmResponse, ToolCallFragment
    from rxllm.aio import AwaitableObservable
    from rxllm.testing import scripted_turn

    call_turn = scripted_turn(
        Chunk(text_delta="Let me look "),
        Chunk(text_delta="that up."),
        Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", "get_order", '{"order_'),)),
        Chunk(tool_call_fragments=(ToolCallFragment(0, None, None, 'id": "A17"}'),)),
    )
    answer_turn = scripted_turn(
        Chunk(text_delta="Order A17 "), Chunk(text_delta="shipped "), Chunk(text_delta="Tuesday.")
    )

    class InProcessModel(BaseLlm):
        """Answers the A17 turn at once on the subscribing thread: the call round, then the answer round."""

        def __init__(self) -> None:
            super().__init__(model="in-process")

        def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> AwaitableObservable[LlmResponse]:
            answered = any(p.function_response is not None for c in llm_request.contents for p in c.parts)
            turn = answer_turn if answered else call_turn

            def subscribe(
                observer: rx_abc.ObserverBase[LlmResponse], _: rx_abc.SchedulerBase | None = None
            ) -> rx_abc.DisposableBase:
                for response in turn:
                    observer.on_next(response)
                observer.on_completed()
                return Disposable()

            return AwaitableObservable(reactivex.create(subscribe))

    return a17_contenders(InProcessModel(), tool_scheduler=ImmediateScheduler())


def _run(what: str, n: int) -> None:
    gc.collect()
    gc.disable()  # collections come in lumps that N turns may or may not include: count the runtime's own work
    run = _contenders()[what]
    prepare: Callable[[], None] | None = getattr(run, "prepare", None)
    for _ in range(WARMUP + n):  # every session exists before the counted turns (its creation is not the turn's)
        if prepare is not None:
            prepare()
    for _ in range(WARMUP):
        run()
    for _ in range(n):
        run()


def _instructions(what: str, n: int) -> int:
    return instructions(__file__, what, str(n))


def _cpu_ms(turns: int) -> dict[str, float]:
    contenders = _contenders()
    best: dict[str, float] = {}
    for _ in range(5):
        for name, run in contenders.items():
            prepare: Callable[[], None] | None = getattr(run, "prepare", None)
            for _ in range(turns):
                if prepare is not None:
                    prepare()
            started = time.process_time()
            for _ in range(turns):
                run()
            took = (time.process_time() - started) / turns * 1e3
            best[name] = min(best.get(name, took), took)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--time", action="store_true", help="CPU ms per turn (best of 5) instead of instructions")
    parser.add_argument("--run", nargs=2, metavar=("WHAT", "N"))
    args = parser.parse_args()
    if args.run:
        _run(args.run[0], int(args.run[1]))
        return 0
    if args.time:
        ms = _cpu_ms(args.turns)
        for name in ("agent", "service"):
            print(f"{name:8}: {ms[name]:.3f} CPU ms per turn, +{(ms[name] - ms['bare']) / 2:.3f} ms per model call "
                  f"over bare ({ms['bare']:.3f} ms)")
        return 0
    per_turn = {
        what: (_instructions(what, args.turns) - _instructions(what, 0)) / args.turns
        for what in ("bare", "agent", "service")
    }
    print(f"bare 2 model calls: {per_turn['bare']:,.0f} instructions")
    for what in ("agent", "service"):
        overhead = (per_turn[what] - per_turn["bare"]) / 2
        print(f"{what:7} turn: {per_turn[what]:,.0f} instructions, {overhead:,.0f} per model call over bare")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
