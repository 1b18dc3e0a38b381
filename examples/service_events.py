"""The service event stream of one tool-using turn, with eager tools, over a real (loopback) SSE server.

A loopback stub server plays an OpenAI-compatible chat-completions API. Asked "Where are orders A17
and B2?", the model says "Let me check both." and calls ``get_order`` twice in one round; a second
round streams the answer. The :class:`~rxllm.service.AiService` turns that into one Observable of
typed events, printed as they arrive (with the thread that delivered each).

Eagerness: the server *holds the first round open* right after the first call became complete
(the second call began) and goes on only once ``get_order("A17")`` has started. So the turn can
finish only if the tool starts while the model is still streaming; its before/after events then
show up before the round's intermediate response.

Run it::

    python examples/service_events.py
    python examples/service_events.py --guardrail    # an output guardrail rewrites the answer

It prints the events, then ``to_text`` of a second identical turn, and exits 0 when the turn had the
expected shape, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Sequence

from reactivex import operators as ops

from rxllm import LlmResponse
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService, AiServiceStreamingEvent, to_text
from rxllm.testing import Hold, Step, StubResponse, StubServer, ToolCallScript, sse_turn

ORDERS = {"A17": "shipped Tuesday", "B2": "ships Friday"}
QUESTION = "Where are orders A17 and B2?"
ANSWER = "A17 shipped Tuesday; B2 ships Friday."
HOLD_SECONDS = 5.0


def first_round(tool_started: threading.Event) -> list[Step]:
    """Text, call_a in two fragments, call_b begins (call_a is complete), a hold until call_a's tool started."""
    events = sse_turn(
        "openai-chat",
        text=["Let me check ", "both."],
        tool_calls=[
            ToolCallScript("call_a", "get_order", ['{"order_', 'id": "A17"}']),
            ToolCallScript("call_b", "get_order", ['{"order_id"', ': "B2"}']),
        ],
    )
    # The last four events: call_b's last fragment, the finish, the usage and [DONE]. Hold before them.
    return [*events[:-4], Hold(tool_started, timeout=HOLD_SECONDS), *events[-4:]]


def second_round() -> list[Step]:
    return list(sse_turn("openai-chat", text=["A17 shipped Tuesday; ", "B2 ships Friday."]))


class Orders:
    """The ``get_order`` tool; the server holds round one until ``get_order("A17")`` has started."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.calls: list[str] = []

    def get_order(self, order_id: str) -> dict[str, str]:
        """Look an order up by its id.

        Args:
            order_id: The order's id, like "A17".
        """
        self.calls.append(order_id)
        if order_id == "A17":
            self.started.set()  # lets the server send the rest of round one
        return {"order_id": order_id, "status": ORDERS.get(order_id, "unknown")}


def shout(response: LlmResponse) -> str:
    """An output guardrail that rewrites the answer."""
    return response.text().upper()


def describe(event: AiServiceStreamingEvent) -> str:
    """One line for an event."""
    kind = event.kind
    if kind in ("partial_response", "partial_thinking"):
        return f"{kind:<22} {event.text!r}"  # type: ignore[union-attr]
    if kind == "partial_tool_call":
        return f"{kind:<22} #{event.index} {event.name or ''} {event.arguments_delta!r}"  # type: ignore[union-attr]
    if kind in ("complete_tool_call", "before_tool_execution"):
        call = event.call  # type: ignore[union-attr]
        return f"{kind:<22} {call.id} {call.name}({json.dumps(call.args)})"
    if kind == "after_tool_execution":
        return f"{kind:<22} {event.call.id} -> {json.dumps(event.result.response)}"  # type: ignore[union-attr]
    if kind in ("intermediate_response", "final_response"):
        response = event.response  # type: ignore[union-attr]
        calls = [c.id for c in response.function_calls()]
        return f"{kind:<22} {response.text()!r} {calls if calls else ''}".rstrip()
    return f"{kind:<22} {event}"


def _position(events: Sequence[AiServiceStreamingEvent], kind: str, detail: str) -> int:
    """Where the first event of ``kind`` whose description contains ``detail`` is (-1 if none)."""
    return next((i for i, e in enumerate(events) if e.kind == kind and detail in describe(e)), -1)


def turn_has_the_expected_shape(events: Sequence[AiServiceStreamingEvent], orders: Orders, guarded: bool) -> bool:
    """Eager tools, each call once, one intermediate, one final last with the (rewritten) answer."""
    kinds = [event.kind for event in events]
    if not kinds or kinds[-1] != "final_response" or kinds.count("final_response") != 1:
        return False
    expected = ANSWER.upper() if guarded else ANSWER
    final_text = events[-1].response.text()  # type: ignore[union-attr]
    before_a = _position(events, "before_tool_execution", "call_a")
    # The server sends call_b's last fragment only once call_a's tool started (or after HOLD_SECONDS):
    # an eager tool's event comes before that fragment; a tool started at the end of the round after it.
    rest_of_round = _position(events, "partial_tool_call", "B2")
    return (
        final_text == expected
        and sorted(orders.calls) == ["A17", "B2"]
        and kinds.count("intermediate_response") == 1
        and kinds.count("after_tool_execution") == 2
        and 0 <= before_a < rest_of_round < kinds.index("intermediate_response")
        and (("partial_response" in kinds) != guarded)
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; return 0 when the turn had the expected shape."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--guardrail", action="store_true", help="add an output guardrail that rewrites the answer")
    args = parser.parse_args(argv)
    orders = Orders()
    responses = [StubResponse(body=first_round(orders.started)), StubResponse(body=second_round())]
    with StubServer(responses) as server:
        model = OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-example-not-a-real-key")
        service = AiService(
            model,
            tools=[orders.get_order],
            system_message="You answer questions about orders. Use get_order to look orders up.",
            output_guardrails=[shout] if args.guardrail else [],
        )
        print(f"user: {QUESTION!r}")

        def show(event: AiServiceStreamingEvent) -> None:
            print(f"  [{threading.current_thread().name:<22}] {describe(event)}")

        events = service.stream(QUESTION).pipe(ops.do_action(on_next=show), ops.to_list()).run()
        ok = turn_has_the_expected_shape(events, orders, args.guardrail)

        # The same turn as text only: without guardrails every round's text streams (the tool round's too).
        server.enqueue(StubResponse(body=first_round(orders.started)), StubResponse(body=second_round()))
        text = to_text(service.stream(QUESTION), service.has_output_guardrails).pipe(ops.to_list()).run()
        print(f"to_text: {text!r}")
        if args.guardrail:
            expected_text = [ANSWER.upper()]
        else:
            expected_text = ["Let me check ", "both.", "A17 shipped Tuesday; ", "B2 ships Friday."]
        ok = ok and text == expected_text
    print("ok" if ok else "unexpected turn shape")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
