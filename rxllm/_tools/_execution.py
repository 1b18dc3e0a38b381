"""Where and how a tool runs: :func:`execute_tool`, the one function that runs a tool, and its runtime.

Rules (both runtimes, ``rxllm.agents`` and ``rxllm.service``, go through :func:`execute_tool`):

* **Synchronous work runs on a worker pool**, never on the thread that delivered the model's
  response (an asyncio transport's event loop, or a stream's I/O thread). The pool is the
  runtime's ``tool_scheduler`` or, by default, one process-wide pool of
  :data:`DEFAULT_TOOL_WORKERS` threads named ``rxllm-tool_N`` (environment variable
  ``RXLLM_TOOL_WORKERS`` sets its size; read when the pool is first used). A tool that hangs
  holds one worker; streams never wait for it.
* **``async def`` tools run on an asyncio loop**: the loop of the thread that subscribed the run
  (``ToolRuntime.loop``, captured by the runtime when the run is subscribed from a running
  loop), else rxllm's own tool loop (one daemon thread named ``rxllm-tool-loop``). Disposing the
  run cancels the task.
* **Every outcome ends the call.** A tool that raises any exception, a ``BaseException`` such
  as ``SystemExit`` (``argparse`` raises it on bad input) or ``GeneratorExit`` included, fails
  its call with :class:`~rxllm.ToolError` (chaining the exception), which the model sees as an
  error result. ``KeyboardInterrupt`` is the one exception that does not go back to the model:
  it fails the *run* with a :class:`~rxllm.ToolError` (see ``rxllm._tools._calls``). Either
  way nothing escapes onto a worker thread or the tool loop, so the run always terminates.
* **A timeout** (``FunctionTool(..., timeout=)``, else the runtime's default) ends the call with
  :class:`~rxllm.ToolTimeoutError`; a synchronous function keeps running on its worker and its
  result is dropped, an ``async def`` one is cancelled.

:func:`execute_tool` is a function from ``(tool, args, context)`` to an Observable of the result,
so hooks compose around it (callbacks, tracing spans) without knowing how the tool runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.scheduler import ImmediateScheduler, TimeoutScheduler

from .._core.errors import ToolError, ToolTimeoutError
from .._core.loop_work import current_owner, owning
from .._core.threads import schedule_cancellable
from .._rx.direct import Direct, DisposeAction, Slot
from ._loops import _local as _tool_loop_of_thread
from ._loops import check_timeout, default_tool_scheduler, running_loop
from ._tool import SUBSCRIBE_RUN, BaseTool, FunctionTool, ToolResult

__all__ = ["ToolRuntime", "execute_tool", "start_tool"]


@dataclass(frozen=True, slots=True)
class ToolRuntime:
    """Where a runtime runs its tools (see the module docstring).

    Attributes:
        scheduler: where synchronous tools run; None for :func:`default_tool_scheduler`.
        loop: where ``async def`` tools run; None for the loop running on the thread that starts
            the tool, else :func:`tool_loop`.
        timeout: seconds a call may take when its tool sets no timeout; None for no limit.
        timer_scheduler: where timeouts are timed (a ``TestScheduler`` in tests); None for
            reactivex's ``TimeoutScheduler``.
        owner: on whose behalf the tools queue work on ``loop`` (``rxllm._core.loop_work``): the
            blocking wait that subscribed the run, else the run itself; None for unknown.
    """

    scheduler: rx_abc.SchedulerBase | None = None
    loop: asyncio.AbstractEventLoop | None = None
    timeout: float | None = None
    timer_scheduler: rx_abc.SchedulerBase | None = None
    owner: object | None = None

    def __post_init__(self) -> None:
        check_timeout(self.timeout, "tool_timeout")

    @classmethod
    def capture(cls, *, scheduler: rx_abc.SchedulerBase | None = None, timeout: float | None = None) -> ToolRuntime:
        """A runtime for a run subscribed now: its loop is the one running on this thread, if any.

        Its tools' work on that loop belongs to the blocking wait subscribing the run, if any, else
        to the run alone (a blocking wait on the loop's thread for another stream does not count it).
        """
        loop = running_loop()
        owner = (current_owner() or object()) if loop is not None else None
        return cls(scheduler=scheduler, loop=loop, timeout=timeout, owner=owner)


_NO_RUNTIME = ToolRuntime()  # (frozen: one for every call given no runtime)


def execute_tool(
    tool: BaseTool, args: dict[str, Any], tool_context: Any, runtime: ToolRuntime | None = None
) -> reactivex.Observable[ToolResult]:
    """Run ``tool`` with ``args``: a cold Observable of its result (the tool's last item), then completion.

    Subscribing schedules the tool on the runtime's worker pool (where ``tool.run`` is called
    and subscribed; an ``async def`` :class:`FunctionTool` then runs on the runtime's loop) and
    starts the timeout's timer. It fails with :class:`~rxllm.ToolError` when the tool fails or
    completes without a result, :class:`~rxllm.ToolTimeoutError` when the timeout fires first.
    Disposing drops the result, cancels an ``async def`` tool and a call not started yet; a
    synchronous function already running finishes on its worker. The result is emitted on the
    thread that produced it (a worker, or the loop's thread).

    Args:
        tool: the tool.
        args: the model's arguments.
        tool_context: what the tool gets as its context (a :class:`ToolContext`).
        runtime: where it runs and its default timeout; ``ToolRuntime()`` when None.
    """
    where = runtime or _NO_RUNTIME

    def subscribe(
        observer: rx_abc.ObserverBase[ToolResult], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        def deliver(result: ToolResult | Exception) -> None:
            if isinstance(result, Exception):
                observer.on_error(result)
            else:
                observer.on_next(result)
                observer.on_completed()

        return start_tool(tool, args, tool_context, where, deliver)

    return Direct(subscribe)


def start_tool(
    tool: BaseTool,
    args: dict[str, Any],
    tool_context: Any,
    where: ToolRuntime,
    deliver: Callable[[ToolResult | Exception], None],
) -> rx_abc.DisposableBase:
    """Start what subscribing :func:`execute_tool` starts; ``deliver`` gets its one outcome, at most once:
    the tool's result, or the exception the Observable would fail with. Disposing the returned
    disposable is disposing that subscription."""
    timeout = tool.timeout if tool.timeout is not None else where.timeout
    lock = threading.Lock()
    state = {"done": False}
    inner = Slot()  # lock-free slots: a dispose from any thread disposes what is set, now or later
    timer: Slot | None = None
    started: Slot | None = None

    def finish(result: list[Any] | Exception) -> None:
        with lock:
            if state["done"]:
                return
            state["done"] = True
        if timer is not None:
            timer.dispose()
        if isinstance(result, Exception):
            inner.dispose()  # a timeout cancels an async tool; an error has already ended it
            deliver(result)
        elif result:
            deliver(result[-1])
        else:
            deliver(ToolError(f"tool {tool.name!r} completed without a result"))

    direct: FunctionTool | None = None  # a FunctionTool as it is: its function called here, no Observable of its own
    if isinstance(tool, FunctionTool):
        kind = type(tool)
        if kind.run is FunctionTool.run and kind._result_of is FunctionTool._result_of:
            direct = tool

    def run(_: rx_abc.SchedulerBase, __: Any = None) -> None:
        if state["done"]:
            return
        items: list[Any] = []
        thread_state = _tool_loop_of_thread  # (what ``using_loop`` sets, without a context manager per call)
        previous = getattr(thread_state, "loop", None)
        thread_state.loop = where.loop
        try:
            try:
                with owning(where.owner):
                    if direct is None:
                        source = tool.run(dict(args), tool_context)
                    else:  # what subscribing ``run`` would do, the function called at once
                        value = direct._run_now(args, tool_context)
                        if type(value) is dict:  # (the usual result) what ``_result_of`` would emit
                            finish([dict(value)])
                            return
                        if value is SUBSCRIBE_RUN:
                            source = tool.run(dict(args), tool_context)
                        else:
                            source = direct._result_of(value)
                    inner.set(
                        source.subscribe(
                            items.append, lambda error: finish(_as_tool_error(tool, error)), lambda: finish(items)
                        )
                    )
            finally:
                thread_state.loop = previous
        except BaseException as exc:  # never onto the worker: the call must end (see the module docstring)
            finish(_as_tool_error(tool, exc))

    if timeout is not None:
        timer_scheduler = where.timer_scheduler or TimeoutScheduler.singleton()

        def expire(_: rx_abc.SchedulerBase, __: Any = None) -> None:
            finish(ToolTimeoutError(f"tool {tool.name!r} did not answer within its timeout of {timeout:g} s"))

        timer = Slot()
        timer.set(timer_scheduler.schedule_relative(timeout, expire))
    pool = where.scheduler or default_tool_scheduler()
    if type(pool) is ImmediateScheduler:  # its schedule runs the action at once: nothing left to cancel
        run(pool)
    else:
        started = Slot()
        started.set(DisposeAction(schedule_cancellable(pool, run)))  # (a plain pool: straight to its executor)

    def dispose() -> None:
        with lock:
            state["done"] = True
        if started is not None:
            started.dispose()
        if timer is not None:
            timer.dispose()
        inner.dispose()

    return DisposeAction(dispose)


def _as_tool_error(tool: BaseTool, error: BaseException) -> ToolError:
    if isinstance(error, ToolError):
        return error
    mapped = ToolError(f"tool {tool.name!r} failed with {type(error).__name__}: {error}")
    mapped.__cause__ = error
    return mapped
