"""Stream an answer into the terminal as it arrives, token by token.

A loopback stub server plays an OpenAI-compatible chat-completions API, pacing its events like a
real model. The script subscribes to ``generate_content(stream=True)``, prints each partial's new
text the moment it arrives (on the I/O thread that read it), and prints the final aggregate's
finish reason and usage when it comes. No network, no key.

Run it::

    python examples/stream_to_terminal.py
    python examples/stream_to_terminal.py --pace 0.1 --provider anthropic

It exits 0 when the partials concatenate to the final's text (the stream contract), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence

from rxllm import BaseLlm, Content, LlmRequest, LlmResponse, Part
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer, sse_turn

ANSWER = "Streams are Observables: partials carry only new text, then one final carries the whole turn."
PROTOCOLS = {"openai": "openai-chat", "anthropic": "anthropic", "gemini": "gemini"}


def words(text: str) -> list[str]:
    """The text in the pieces a model streams it in: word by word, spaces kept."""
    pieces = text.split(" ")
    return [piece if i == 0 else " " + piece for i, piece in enumerate(pieces)]


def make_model(provider: str, url: str) -> BaseLlm:
    """A model of ``provider`` pointed at the stub server."""
    if provider == "anthropic":
        return AnthropicModel("claude-sonnet-4-5", base_url=url, api_key="sk-example")
    if provider == "gemini":
        return GeminiModel("gemini-2.5-flash", base_url=url, api_key="example")
    return OpenAiChatModel("gpt-4o-mini", base_url=url + "/v1", api_key="sk-example")


def main(argv: Sequence[str] | None = None) -> int:
    """Stream one answer; return 0 when it followed the contract."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pace", type=float, default=0.02, help="seconds between streamed events (default 0.02)")
    parser.add_argument("--provider", choices=sorted(PROTOCOLS), default="openai")
    args = parser.parse_args(argv)

    events = sse_turn(PROTOCOLS[args.provider], text=words(ANSWER))
    with StubServer([StubResponse.sse(events, delay=args.pace)]) as server:
        model = make_model(args.provider, server.url)
        request = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("What is rxllm?")])])
        streamed: list[str] = []
        finals: list[LlmResponse] = []
        errors: list[Exception] = []
        done = threading.Event()

        def on_next(response: LlmResponse) -> None:
            if response.partial:
                streamed.append(response.text())
                print(response.text(), end="", flush=True)
            else:
                finals.append(response)

        def on_error(error: Exception) -> None:
            errors.append(error)
            done.set()

        print(f"user: What is rxllm?  ({args.provider} wire format)\nmodel: ", end="", flush=True)
        subscription = model.generate_content(request, stream=True).subscribe(on_next, on_error, done.set)
        try:
            if not done.wait(timeout=60):
                print("\ntimed out")
                return 1
        except KeyboardInterrupt:
            subscription.dispose()  # closes the connection at once
            print("\ncancelled")
            return 130
    print()
    if errors:
        print(f"failed: {errors[0]}")
        return 1
    [final] = finals
    usage = final.usage_metadata
    tokens = usage.total_token_count if usage is not None else None
    ok = "".join(streamed) == final.text() == ANSWER
    print(f"[{len(streamed)} partials, then one final: {final.finish_reason}, {tokens} tokens]")
    print("OK: the partials concatenate to the final's text" if ok else "UNEXPECTED: the final differs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
