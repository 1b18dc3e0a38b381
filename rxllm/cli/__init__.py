"""The ``rxllm`` command: ``rxllm demo``, ``rxllm chat``, ``rxllm replay`` (also ``python -m rxllm``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._demo import PROVIDERS, run_demo
from ._style import Style

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rxllm", description="LLM streams as ReactiveX Observables.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the order-A17 agent against an embedded local provider")
    demo.add_argument("--provider", choices=sorted(PROVIDERS), default="openai",
                      help="the wire format the local provider speaks (default: openai)")
    demo.add_argument("--pace", type=float, default=0.04, metavar="SECONDS",
                      help="pause between streamed events, like a real model (default: 0.04; 0 for none)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    out = sys.stdout
    style = Style.for_stream(out)
    if args.command == "demo":
        return run_demo(provider=args.provider, pace=args.pace, out=out, style=style)
    return 2
