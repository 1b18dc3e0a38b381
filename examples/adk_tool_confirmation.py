"""ADK's human-in-the-loop sample (``human_tool_confirmation``: reimbursements and time off) ported.

ADK Java has the parts (``FunctionTool.create(method, requireConfirmation)``,
``ToolContext.requestConfirmation(hint, payload)``, the ``adk_request_confirmation`` call) but no
sample; this is ADK Python's ``contributing/samples/human_tool_confirmation`` with Java's
semantics. ``reimburse`` always needs approval (``require_confirmation=True``);
``request_time_off`` asks for it itself beyond two days, with a payload the manager fills in.

Each run pauses the call: the run stores a long-running ``adk_request_confirmation`` call, the
client answers it with a function response (ADK's ``ToolConfirmation``: ``confirmed``,
``payload``), and the next run runs the call, or refuses it. The session lives in SQLite, and each
answer is sent through a new runner on a newly opened store: a paused call survives a restart.
The model is scripted (no key needed).

Run it::

    python examples/adk_tool_confirmation.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from reactivex import operators as ops

from rxllm import Chunk, Content, FunctionResponse, Part, ToolCallFragment
from rxllm.agents import Event, FunctionTool, LlmAgent, Runner, SqliteSessionService, ToolContext
from rxllm.testing import ScriptedLlm, scripted_turn

APP, USER, SESSION = "time_off", "employee", "s1"
DONE: list[str] = []


def reimburse(amount: int) -> dict[str, Any]:
    """Reimburse the employee for the given amount."""
    DONE.append(f"reimbursed {amount}")
    return {"status": "ok"}


def request_time_off(days: int, tool_context: ToolContext) -> dict[str, Any]:
    """Request day off for the employee."""
    if days <= 0:
        return {"status": "Invalid days to request."}
    if days <= 2:
        return {"status": "ok", "approved_days": days}
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(
            hint="Please approve or reject the tool call request_time_off() by responding with a FunctionResponse "
            "with an expected ToolConfirmation payload.",
            payload={"approved_days": 0},
        )
        return {"status": "Manager approval is required."}
    payload = confirmation.payload if isinstance(confirmation.payload, dict) else {}
    approved = min(int(payload.get("approved_days", 0)), days)  # type: ignore[arg-type]
    if approved == 0:
        return {"status": "The time off request is rejected.", "approved_days": 0}
    DONE.append(f"{approved} days off")
    return {"status": "ok", "approved_days": approved}


def call(name: str, args: str, call_id: str) -> list[Any]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, args),)))


def say(text: str) -> list[Any]:
    return scripted_turn(Chunk(text_delta=text))


MODEL = ScriptedLlm([
    call("request_time_off", '{"days": 5}', "call_1"),
    say("Your manager needs to approve 5 days off."),
    say("Your manager approved 3 of the 5 days."),
    call("reimburse", '{"amount": 2000}', "call_2"),
    say("A reimbursement of 2000 needs approval."),
    say("The reimbursement was rejected."),
])

AGENT = LlmAgent(
    "time_off_agent",
    MODEL,
    instruction="You are a helpful assistant that can help employees with reimbursement and time off requests.\n"
    "- Use the `reimburse` tool for reimbursement requests.\n"
    "- Use the `request_time_off` tool for time off requests.\n"
    "- Prioritize using tools to fulfill the user's request.\n"
    "- Always respond to the user with the tool results.",
    tools=[FunctionTool(reimburse, require_confirmation=True), request_time_off],
)


def turn(db: Path, message: Content | str) -> list[Event]:
    """One run through a new runner on a newly opened store (as after a restart)."""
    service = SqliteSessionService(db)
    try:
        events: list[Event] = Runner(AGENT, APP, service).run_async(USER, SESSION, message).pipe(ops.to_list()).run()
    finally:
        service.close()
    for event in events:
        for c in event.function_calls():
            print(f"  {event.author} -> {c.name}({c.args.get('toolConfirmation', c.args)})")
        for r in event.function_responses():
            print(f"  {r.name} returned {r.response}")
        if event.text():
            print(f"  {event.author}: {event.text()}")
    return events


def answer(events: list[Event], confirmed: bool, payload: Any = None) -> Content:
    (request,) = [c for e in events for c in e.function_calls() if c.name == "adk_request_confirmation"]
    response: dict[str, Any] = {"confirmed": confirmed}
    if payload is not None:
        response["payload"] = payload
    print(f"Manager> {response}")
    return Content(role="user", parts=(Part(function_response=FunctionResponse(
        id=request.id, name="adk_request_confirmation", response=response)),))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sessions.db"
        service = SqliteSessionService(db)
        service.create_session(APP, USER, session_id=SESSION).run()
        service.close()

        print("You> I need 5 days off.")
        asked = turn(db, "I need 5 days off.")
        turn(db, answer(asked, True, {"approved_days": 3}))
        print("You> Please reimburse 2000.")
        asked = turn(db, "Please reimburse 2000.")
        turn(db, answer(asked, False))

    print(f"done: {DONE}")
    ok = DONE == ["3 days off"] and len(MODEL.requests) == 6
    print("tool confirmation: OK" if ok else "tool confirmation: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
