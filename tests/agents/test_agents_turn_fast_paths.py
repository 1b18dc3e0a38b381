"""The agent turn's cheap plumbing behaves as the stock pieces it replaced.

Lock-free slots (``rxllm._rx.direct``) hold what ``execute_tool`` and the run lane started: a
dispose from another thread must still dispose it at once; session snapshots are built without
``model_construct`` and must be the same objects it builds.
"""

from __future__ import annotations

import threading
from typing import Any

from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler.scheduler import Scheduler

from rxllm._tools import ToolContext, ToolRuntime, execute_tool
from rxllm.agents import Event, FunctionTool, InMemorySessionService, Session


class _Queued(Scheduler):
    """A scheduler that only queues: ``schedule`` returns a disposable that records its disposal."""

    def __init__(self) -> None:
        self.actions: list[Any] = []
        self.cancelled = threading.Event()

    def schedule(self, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        self.actions.append(action)
        return Disposable(self.cancelled.set)

    def schedule_relative(self, duetime: Any, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        return self.schedule(action, state)

    def schedule_absolute(self, duetime: Any, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        return self.schedule(action, state)


def _on_other_thread(action: Any) -> None:
    thread = threading.Thread(target=action)
    thread.start()
    thread.join()


def test_a_tool_call_disposed_from_another_thread_is_cancelled_at_once_and_never_runs() -> None:
    calls: list[str] = []

    def get_order(order_id: str) -> dict[str, str]:
        calls.append(order_id)
        return {"status": "shipped"}

    pool = _Queued()
    items: list[Any] = []
    subscription = execute_tool(
        FunctionTool(get_order), {"order_id": "A17"}, ToolContext.standalone(), ToolRuntime(scheduler=pool)
    ).subscribe(items.append)
    assert len(pool.actions) == 1 and not pool.cancelled.is_set()

    _on_other_thread(subscription.dispose)

    assert pool.cancelled.is_set()  # the scheduled start was disposed by the other thread's dispose
    pool.actions[0](pool, None)  # a pool that runs it anyway: the call is over, the tool is not called
    assert calls == [] and items == []


def test_a_tool_call_disposed_from_another_thread_while_running_drops_its_result() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(order_id: str) -> dict[str, str]:
        entered.set()
        release.wait()
        return {"status": "shipped"}

    pool = _Queued()
    items: list[Any] = []
    subscription = execute_tool(
        FunctionTool(slow), {"order_id": "A17"}, ToolContext.standalone(), ToolRuntime(scheduler=pool)
    ).subscribe(items.append)
    worker = threading.Thread(target=pool.actions[0], args=(pool, None))
    worker.start()
    assert entered.wait(10)
    _on_other_thread(subscription.dispose)
    release.set()
    worker.join()
    assert items == []


def test_session_snapshots_are_the_objects_model_construct_builds() -> None:
    service = InMemorySessionService()
    created = service.create_session("shop", "u", {"visits": 1, "app:tier": "gold"}, session_id="s").run()
    stored = service.append_event(created, Event(author="user")).run()
    fetched = service.get_session("shop", "u", "s").run()
    for snapshot in (created, fetched, *service.list_sessions("shop", "u").run()):
        reference = Session.model_construct(**dict(snapshot.__dict__))
        assert snapshot == reference
        assert snapshot.model_fields_set == reference.model_fields_set == set(Session.model_fields)
        assert snapshot.model_dump() == reference.model_dump() and snapshot.to_json() == reference.to_json()
        assert repr(snapshot) == repr(reference)
    assert fetched.events == (stored,) and fetched.state == {"visits": 1, "app:tier": "gold"}
    fetched.state["visits"] = 2  # a snapshot's state is its own copy
    assert service.get_session("shop", "u", "s").run().state["visits"] == 1
    empty = service.create_session("blog", "u", session_id="t").run()
    assert empty.state == {} and empty.state is not service.get_session("blog", "u", "t").run().state
