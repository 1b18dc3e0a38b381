"""Answer only the latest prompt: ``switch_map`` cancels the stream in flight when a newer prompt arrives.

Prompts arrive on a ``Subject``; ``ops.switch_map(lambda p: model.generate_content(...))`` keeps
only the newest answer. A loopback stub server streams the first answer slowly (it holds after the
first words, as a long generation would); when the second prompt arrives, ``switch_map`` disposes
the first call, rxllm shuts its socket down, and the server sees the client close that connection
while the second answer streams on a new one.

Run it::

    python examples/switch_map_cancel.py

It exits 0 and prints ``switch_map cancel: OK`` when the server saw the first connection closed by
the client and only the second answer completed.
"""

from __future__ import annotations

import sys
import threading
import time

from reactivex import Observable
from reactivex import operators as ops
from reactivex.subject import Subject

from rxllm import Content, LlmRequest, LlmResponse, Part
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Hold, StubResponse, StubServer, sse_turn

STORY = ["Once ", "upon ", "a ", "time, ", "far ", "away..."]
ANSWER = ["The capital ", "of France ", "is Paris."]


def ask(prompt: str) -> LlmRequest:
    """A one-message request."""
    return LlmRequest(contents=[Content(role="user", parts=[Part.from_text(prompt)])])


def main() -> int:
    """Run the example; return 0 when the superseded stream's connection was closed."""
    story = sse_turn("openai-chat", text=STORY)
    never = threading.Event()  # the rest of the story is held until the server closes (or 30 s)
    script = [
        StubResponse(body=[*story[:3], Hold(never), *story[3:]]),
        StubResponse(body=sse_turn("openai-chat", text=ANSWER)),
    ]
    with StubServer(script) as server:
        model = OpenAiChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-example")
        prompts: Subject[str] = Subject()
        answers: list[LlmResponse] = []
        errors: list[Exception] = []
        story_started = threading.Event()
        done = threading.Event()

        def on_next(response: LlmResponse) -> None:
            answers.append(response)
            if response.partial:
                print(f"  partial: {response.text()!r}", flush=True)
                story_started.set()
            else:
                print(f"  final  : {response.text()!r}", flush=True)

        def on_error(error: Exception) -> None:
            errors.append(error)
            done.set()

        def answer(prompt: str) -> Observable[LlmResponse]:
            return model.generate_content(ask(prompt), stream=True)

        latest_only = prompts.pipe(ops.switch_map(answer))  # a newer prompt disposes the answer in flight
        latest_only.subscribe(on_next, on_error, done.set)

        print("prompt 1: 'Tell me a long story'")
        prompts.on_next("Tell me a long story")
        if not story_started.wait(timeout=10):
            print("the first answer never started")
            return 1
        switched_at = time.monotonic()
        print("prompt 2: 'What is the capital of France?'  (switch_map disposes answer 1)")
        prompts.on_next("What is the capital of France?")
        prompts.on_completed()
        finished = done.wait(timeout=10)

        first = server.connections[0]
        closed = first.wait_closed_by_client(timeout=5.0)
        print(f"server: connection 1 closed by the client: {closed}")
        if first.closed_at is not None:
            print(f"server: ... {(first.closed_at - switched_at) * 1000:.1f} ms after the switch")
        print(f"server: requests {len(server.requests)}, connections {len(server.connections)}")
        finals = [r for r in answers if not r.partial]
        ok = (
            finished
            and not errors
            and closed
            and not never.is_set()
            and [r.text() for r in finals] == ["".join(ANSWER)]
            and all(r.text() in STORY + ANSWER for r in answers if r.partial)
        )
    print("switch_map cancel: OK" if ok else "switch_map cancel: UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
