"""Instructions per chunk of rxllm's pure core, counted with callgrind (repeatable on a loaded machine).

The pure core is what every stream runs per network read, minus the network and Rx: SSE decoding,
the provider's parser (OpenAI chat, Anthropic, Gemini: ``--provider``, all three by default), the
aggregator, each partial handed to a subscriber that drops it or keeps it. The count per chunk is
``(Ir(N chunks) - Ir(0 chunks)) / N``, so start-up and imports cancel.

Run (needs ``valgrind``)::

    .venv/bin/python benchmarks/core_instructions.py --chunks 10000

``--run MODE N`` is the inner run the script starts under callgrind.
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

from _callgrind import instructions

PROVIDERS = ["openai-chat", "anthropic", "gemini"]


def _events(n: int) -> list[bytes]:
    events = []
    for i in range(n):
        payload = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench",
                   "choices": [{"index": 0, "delta": {"content": f"tok{i % 10} "}, "finish_reason": None}]}
        events.append(b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n")
    return events


def _provider_events(provider: str, n: int, total: int) -> list[bytes]:
    """``n`` text events of ``provider``'s stream, between its usual head and tail events."""
    from rxllm.testing import sse_turn

    full = sse_turn(provider, text=[f"tok{i % 10} " for i in range(total)])  # the same events built in every run
    one = sse_turn(provider, text=["x"])
    head = next(i for i, event in enumerate(one) if b'"x"' in event)
    tail = len(one) - head - 1
    return [*full[:head], *full[head:head + n], *full[len(full) - tail:]]


def _run(mode: str, n: int, total: int, provider: str = "openai-chat") -> None:
    from rxllm import LlmResponse, StreamAggregator
    from rxllm._models.drive import drive_sse
    from rxllm._models.sse_chat_model import _emit_partials, _on_chunk
    from rxllm.providers.anthropic import AnthropicChunkParser
    from rxllm.providers.gemini import GeminiChunkParser
    from rxllm.providers.openai import OpenAiChatChunkParser

    parser = {"anthropic": AnthropicChunkParser, "gemini": GeminiChunkParser}.get(provider, OpenAiChatChunkParser)()
    if provider == "openai-chat":
        events = [*_events(total)[:n], b"data: [DONE]\n\n"]  # the same events built in every run
    else:
        events = _provider_events(provider, n, total)
    kept: list[LlmResponse] = []
    aggregator = StreamAggregator()

    def drop(partial: LlmResponse) -> None:
        del partial

    # The streams' own per-chunk step (aggregate, hand the partial over), to a subscriber that keeps or drops it.
    subscriber = SimpleNamespace(on_next=kept.append if mode == "keep" else drop)
    on_chunk = _on_chunk(_emit_partials, aggregator, subscriber, None)  # type: ignore[arg-type]

    drive_sse(events, parser, on_chunk)
    aggregator.finish()


def _instructions(mode: str, n: int, total: int, provider: str) -> int:
    return instructions(__file__, mode, str(n), "--chunks", str(total), "--provider", provider)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--provider", choices=PROVIDERS, action="append",
                        help="openai-chat, anthropic or gemini (repeatable; default: all three)")
    parser.add_argument("--run", nargs=2, metavar=("MODE", "N"))
    args = parser.parse_args()
    if args.run:
        _run(args.run[0], int(args.run[1]), args.chunks, (args.provider or PROVIDERS)[0])
        return 0
    for provider in args.provider or PROVIDERS:
        for mode in ("drop", "keep"):
            per_chunk = (_instructions(mode, args.chunks, args.chunks, provider)
                         - _instructions(mode, 0, args.chunks, provider)) / args.chunks
            print(f"{provider:11} partials {mode:4}: {per_chunk:,.0f} instructions per chunk", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
