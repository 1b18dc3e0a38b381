"""The order-status worked example, end to end: "Where is order A17?" over a real (loopback) SSE server.

A loopback stub server plays an OpenAI-compatible chat-completions API. The model first streams a
short explanation and a ``get_order`` call whose arguments arrive split across chunks; the agent
runs the tool once with ``{"order_id": "A17"}``; the model then streams the answer. The session
ends up holding exactly four events: the user's question, one model event with both the text and
the call, one function-response event, and one model event with the answer.

Run it::

    python examples/order_status.py            # SSE mode: partials stream as they arrive
    python examples/order_status.py --mode none

It exits 0 when the history has that shape, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from reactivex import operators as ops

from rxllm import Content, Part
from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Step, StubResponse, StubServer

ORDERS = {"A17": {"order_id": "A17", "status": "shipped", "shipped_on": "Tuesday"}}


def get_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id.

    Args:
        order_id: The order's id, like "A17".
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise LookupError(f"no order {order_id!r}")
    return dict(order)


def _chunk(delta: dict[str, Any], finish_reason: str | None = None, usage: dict[str, int] | None = None) -> str:
    payload: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-stub",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        payload["usage"] = usage
    return json.dumps(payload)


def _sse(*events: str) -> list[bytes]:
    return [f"data: {event}\n\n".encode() for event in events]


def first_turn_events() -> list[bytes]:
    """The first turn's six data lines: two text deltas, a tool call split in two fragments, the finish, [DONE]."""
    return _sse(
        _chunk({"role": "assistant", "content": "Let me look "}),
        _chunk({"content": "that up."}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order_'},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'id": "A17"}'}}]}),
        _chunk({}, "tool_calls", {"prompt_tokens": 20, "completion_tokens": 15, "total_tokens": 35}),
        "[DONE]",
    )


def second_turn_events() -> list[bytes]:
    """The answer, streamed."""
    return _sse(
        _chunk({"role": "assistant", "content": "Order A17 "}),
        _chunk({"content": "shipped "}),
        _chunk({"content": "Tuesday."}),
        _chunk({}, "stop", {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}),
        "[DONE]",
    )


def streamed_responses(first_turn: Sequence[Step] | None = None) -> list[StubResponse]:
    """The two SSE responses of the example (``first_turn`` overrides the first body, e.g. to add a Hold)."""
    return [
        StubResponse(body=tuple(first_turn if first_turn is not None else first_turn_events())),
        StubResponse(body=tuple(second_turn_events())),
    ]


def single_responses() -> list[StubResponse]:
    """The same two turns as non-streamed ``chat.completion`` bodies (for ``--mode none``)."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_order", "arguments": '{"order_id": "A17"}'},
    }
    first = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-stub",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Let me look that up.", "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 15, "total_tokens": 35},
    }
    second = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "model": "gpt-stub",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Order A17 shipped Tuesday."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
    }
    return [StubResponse.json(200, first), StubResponse.json(200, second)]


def make_runner(base_url: str) -> InMemoryRunner:
    """The support agent with its ``get_order`` tool, on an OpenAI-compatible model at ``base_url``."""
    model = OpenAiChatModel("gpt-stub", base_url=base_url, api_key="sk-example-not-a-real-key")
    agent = LlmAgent(
        "support",
        model,
        instruction="You answer questions about orders. Use get_order to look orders up.",
        tools=[get_order],
    )
    return InMemoryRunner(agent, app_name="shop")


def history_has_the_expected_shape(events: Sequence[Event]) -> bool:
    """The user event, one model event with text and call, one function-response event, the answer."""
    if len(events) != 4:
        return False
    user, call, response, answer = events
    calls = call.function_calls()
    responses = response.function_responses()
    return (
        user.author == "user"
        and call.text() == "Let me look that up."
        and len(calls) == 1
        and calls[0].name == "get_order"
        and calls[0].args == {"order_id": "A17"}
        and len(responses) == 1
        and responses[0].id == calls[0].id
        and responses[0].response == ORDERS["A17"]
        and answer.text() == "Order A17 shipped Tuesday."
        and answer.is_final_response()
    )


def describe(event: Event) -> str:
    """One line for an event."""
    kind = "partial" if event.partial else "stored "
    calls = [f"{c.name}({json.dumps(c.args)})" for c in event.function_calls()]
    responses = [json.dumps(r.response) for r in event.function_responses()]
    return f"{kind} {event.author:>8}: {event.text()!r} {' '.join(calls + responses)}".rstrip()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; return 0 when the session history has the expected shape."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mode", choices=["sse", "none"], default="sse")
    args = parser.parse_args(argv)
    mode = StreamingMode.SSE if args.mode == "sse" else StreamingMode.NONE
    responses = streamed_responses() if mode is StreamingMode.SSE else single_responses()
    with StubServer(responses) as server:
        runner = make_runner(server.url + "/v1")
        runner.session_service.create_session("shop", "user-1", session_id="session-1").run()
        question = Content(role="user", parts=(Part.from_text("Where is order A17?"),))
        print(f"user    : {question.text()!r}")
        run = runner.run_async("user-1", "session-1", question, RunConfig(streaming_mode=mode))

        def show(event: Event) -> None:
            print(describe(event))

        run.pipe(ops.do_action(on_next=show), ops.to_list()).run()
        history = runner.session_service.get_session("shop", "user-1", "session-1").run().events
        print(f"\nsession history ({len(history)} events, {len(server.requests)} model calls):")
        for event in history:
            print("  " + describe(event))
    ok = history_has_the_expected_shape(history)
    print("\nOK" if ok else "\nUNEXPECTED HISTORY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
