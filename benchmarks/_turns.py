"""The call-level sections of ``bench_stream.py``: sequential calls over TLS, time to first partial on
a small stream, and the runtime's own cost (an agent turn and a service turn over the bare model calls).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from _contenders import REQUEST, floor_text, rxllm_runner
from _server import BenchServer
from reactivex import operators as ops

from rxllm import Content, HttpTransport, LlmRequest, LlmResponse, Part, RetryPolicy
from rxllm.agents import InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService

QUESTION = "Where is order A17?"
INSTRUCTION = "You answer questions about orders. Use get_order to look orders up."


def get_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id.

    Args:
        order_id: The order's id, like "A17".
    """
    return {"order_id": order_id, "status": "shipped", "shipped_on": "Tuesday"}


@contextmanager
def _trusting(ca_file: str) -> Iterator[None]:
    """httpx clients built inside trust ``ca_file`` (httpx reads ``SSL_CERT_FILE`` when a client is built)."""
    old = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = ca_file
    try:
        yield
    finally:
        if old is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = old


# --- sequential calls over loopback TLS ------------------------------------------------------------

Session = Callable[[str, int, int], list[float]]  # (url, calls, chunks) -> seconds per call


def _httpx_session(url: str, calls: int, chunks: int) -> list[float]:
    """The floor: one ``httpx2.Client`` reused for every call (its pool keeps the connection)."""
    times = []
    with httpx2.Client(timeout=60) as client:
        for _ in range(calls):
            started = time.perf_counter()
            pieces = []
            with client.stream("POST", f"{url}/text/{chunks}/chat/completions", json={"stream": True}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        pieces.append(line)
            times.append(time.perf_counter() - started)
    return times


def _rxllm_session(url: str, calls: int, chunks: int) -> list[float]:
    """One model on its own ``HttpTransport`` (as an application holds one), ``calls`` streamed calls."""
    transport = HttpTransport()
    model = OpenAiChatModel(
        "bench", base_url=f"{url}/text/{chunks}", api_key="bench", transport=transport, retry_policy=RetryPolicy.never()
    )
    times = []
    try:
        for _ in range(calls):
            started = time.perf_counter()
            model.generate_content(REQUEST, stream=True).pipe(ops.to_list()).run()
            times.append(time.perf_counter() - started)
    finally:
        transport.close()
    return times


def _openai_session(url: str, calls: int, chunks: int) -> list[float] | None:
    try:
        import openai
    except ImportError:
        return None
    times = []
    with openai.OpenAI(base_url=f"{url}/text/{chunks}", api_key="bench", max_retries=0) as client:
        for _ in range(calls):
            started = time.perf_counter()
            stream = client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "go"}],
                                                    stream=True)
            "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            times.append(time.perf_counter() - started)
    return times


def sequential_calls(calls: int, chunks: int, reps: int) -> list[dict[str, Any]]:
    """``calls`` sequential calls per session over loopback TLS; connections the server accepted, per session.

    Each session starts from a fresh client (its first call pays the TCP and TLS handshakes, as in an
    application's first call); sessions of the contenders are interleaved ``reps`` times.
    """
    sessions: dict[str, Session] = {
        "httpx2.Client, reused (floor)": _httpx_session,
        "rxllm OpenAiChatModel": _rxllm_session,
    }
    try:
        import openai  # noqa: F401
    except ImportError:
        pass
    else:
        sessions["openai SDK create(stream=True)"] = _openai_session  # type: ignore[assignment]
    times: dict[str, list[float]] = {name: [] for name in sessions}
    connections: dict[str, list[int]] = {name: [] for name in sessions}
    with BenchServer(tls=True) as server:
        assert server.ca_file is not None
        with _trusting(server.ca_file):
            for session in sessions.values():  # warm-up: imports, TLS contexts
                session(server.url, 2, chunks)
            for _ in range(reps):
                for name, session in sessions.items():
                    before = server.connections
                    times[name] += session(server.url, calls, chunks)
                    connections[name].append(server.connections - before)
    return [
        {
            "contender": name,
            "calls": calls,
            "connections_per_session": max(connections[name]),
            "median_ms_per_call": round(statistics.median(times[name]) * 1e3, 3),
        }
        for name in sessions
    ]


# --- time to first partial on a small stream -------------------------------------------------------


def first_partial(chunks: int, reps: int) -> dict[str, Any]:
    """Median time from request to first text item, the floor and rxllm interleaved, ``reps`` each."""
    contenders = {"floor": floor_text, "rxllm": rxllm_runner("text")}
    firsts: dict[str, list[float]] = {name: [] for name in contenders}
    with BenchServer() as server:
        for run in contenders.values():
            run(server.url, chunks)
        for _ in range(reps):
            for name, run in contenders.items():
                firsts[name].append(run(server.url, chunks)[1])
    floor_ms = statistics.median(firsts["floor"]) * 1e3
    rxllm_ms = statistics.median(firsts["rxllm"]) * 1e3
    return {
        "chunks": chunks,
        "reps": reps,
        "floor_ms": round(floor_ms, 3),
        "rxllm_ms": round(rxllm_ms, 3),
        "rxllm_minus_floor_ms": round(rxllm_ms - floor_ms, 3),
    }


# --- short calls: CPU per call ----------------------------------------------------------------------


def short_call_contenders(url: str, client: httpx2.Client) -> dict[str, Callable[[], str]]:
    """The short-call contenders on the server's ``url`` (``.../text/<chunks>``), each returning the final text.

    The floor reuses ``client`` (``iter_lines`` + ``json.loads`` + join); rxllm reuses one
    ``OpenAiChatModel`` per row, on its I/O thread as by default, and with
    ``scheduler=ImmediateScheduler()``. ``call_instructions.py`` counts the same contenders.
    """
    from reactivex.scheduler import ImmediateScheduler

    def floor() -> str:
        pieces = []
        with client.stream("POST", f"{url}/chat/completions", json={"model": "bench", "stream": True}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                choices = json.loads(data)["choices"]
                if choices:
                    content = choices[0]["delta"].get("content")
                    if content:
                        pieces.append(content)
        return "".join(pieces)

    def rxllm_call(model: OpenAiChatModel) -> Callable[[], str]:
        def call() -> str:
            items: list[LlmResponse] = model.generate_content(REQUEST, stream=True).pipe(ops.to_list()).run()
            return items[-1].text()

        return call

    never = RetryPolicy.never()
    return {
        "floor (httpx2.Client, reused)": floor,
        "rxllm (I/O thread, the default)": rxllm_call(
            OpenAiChatModel("bench", base_url=url, api_key="bench", retry_policy=never)),
        "rxllm (scheduler=ImmediateScheduler())": rxllm_call(
            OpenAiChatModel("bench", base_url=url, api_key="bench", retry_policy=never,
                            scheduler=ImmediateScheduler())),
    }


def short_calls(chunks: int, reps: int) -> dict[str, Any]:
    """CPU per call of a ``chunks``-chunk stream (``time.process_time``: this process, every thread),
    sequential calls on a reused client, interleaved ``reps`` times; medians, and rxllm minus the floor.

    The floor reuses one ``httpx2.Client`` (``iter_lines`` + ``json.loads`` + join); rxllm reuses one
    ``OpenAiChatModel`` (``generate_content(stream=True)``, partials collected by ``ops.to_list()``),
    on its I/O thread as by default, and with ``scheduler=ImmediateScheduler()`` (the attempt runs on
    the subscribing thread: the same code without the hand-off to the I/O thread and back).
    """
    with BenchServer() as server, httpx2.Client(timeout=60) as client:
        contenders = short_call_contenders(f"{server.url}/text/{chunks}", client)
        texts = {run() for run in contenders.values()}
        assert len(texts) == 1, texts
        cpu: dict[str, list[float]] = {name: [] for name in contenders}
        wall: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(20):  # warm-up
            for run in contenders.values():
                run()
        for _ in range(reps):
            for name, run in contenders.items():
                started, cpu_started = time.perf_counter(), time.process_time()
                run()
                cpu[name].append(time.process_time() - cpu_started)
                wall[name].append(time.perf_counter() - started)
    floor_ms = statistics.median(cpu["floor (httpx2.Client, reused)"]) * 1e3
    rows = []
    for name in contenders:
        ms = statistics.median(cpu[name]) * 1e3
        rows.append({"contender": name, "cpu_ms_per_call": round(ms, 3), "cpu_over_floor_ms": round(ms - floor_ms, 3),
                     "wall_ms_per_call": round(statistics.median(wall[name]) * 1e3, 3)})
    return {"chunks": chunks, "reps": reps, "rows": rows}


# --- the runtime's own cost ------------------------------------------------------------------------


def _answer_request() -> LlmRequest:
    """The second model call of the A17 turn: the question, the call, the tool's result."""
    call = Part.from_function_call("get_order", {"order_id": "A17"}, id="call_1")
    result = Part.from_function_response("get_order", get_order("A17"), id="call_1")
    return LlmRequest(
        contents=[
            Content(role="user", parts=[Part.from_text(QUESTION)]),
            Content(role="model", parts=[Part.from_text("Let me look that up."), call]),
            Content(role="user", parts=[result]),
        ]
    )


def a17_contenders(model: Any, *, tool_scheduler: Any = None) -> dict[str, Callable[[], None]]:
    """The order-A17 turn's three contenders on ``model``, each one turn a call, as the instruction
    scripts count them: ``bare`` (the two model calls), ``agent`` (an ``LlmAgent`` in an
    ``InMemoryRunner``, SSE mode; its ``prepare`` creates the session a later call runs in, outside
    the count) and ``service`` (an ``AiService``). ``tool_scheduler`` runs their tools (None: the
    default pools)."""
    first_request = LlmRequest(contents=[Content(role="user", parts=[Part.from_text(QUESTION)])])
    answer_request = _answer_request()
    runner = InMemoryRunner(
        LlmAgent("support", model, instruction=INSTRUCTION, tools=[get_order]),
        app_name="shop",
        tool_scheduler=tool_scheduler,
    )
    service = AiService(model, tools=[get_order], system_message=INSTRUCTION, tool_scheduler=tool_scheduler)
    question = Content(role="user", parts=(Part.from_text(QUESTION),))
    sse = RunConfig(streaming_mode=StreamingMode.SSE)
    sessions = iter(range(10**9))
    pending: list[str] = []

    def bare() -> None:
        for request in (first_request, answer_request):
            items: list[Any] = model.generate_content(request, stream=True).pipe(ops.to_list()).run()
            assert not items[-1].partial

    def agent() -> None:
        events: list[Any] = runner.run_async("u", pending.pop(), question, sse).pipe(ops.to_list()).run()
        assert events[-1].text() == "Order A17 shipped Tuesday.", events[-1]

    def prepare_agent() -> None:
        session_id = f"s{next(sessions)}"
        runner.session_service.create_session("shop", "u", session_id=session_id).run()
        pending.append(session_id)

    def service_turn() -> None:
        events: list[Any] = service.stream(QUESTION).pipe(ops.to_list()).run()
        assert events[-1].kind == "final_response", events[-1]
        assert events[-1].response.text() == "Order A17 shipped Tuesday.", events[-1]

    agent.prepare = prepare_agent  # type: ignore[attr-defined]
    return {"bare": bare, "agent": agent, "service": service_turn}


def runtime_cost(reps: int) -> dict[str, Any]:
    """The order-A17 turn (2 model calls, 1 tool) through an agent and a service, against the 2 bare calls.

    Same server, same model and transport; the three are interleaved ``reps`` times; medians.
    """
    with BenchServer() as server:
        model = OpenAiChatModel(
            "bench", base_url=f"{server.url}/a17", api_key="bench", retry_policy=RetryPolicy.never()
        )
        first_request = LlmRequest(contents=[Content(role="user", parts=[Part.from_text(QUESTION)])])
        answer_request = _answer_request()
        runner = InMemoryRunner(LlmAgent("support", model, instruction=INSTRUCTION, tools=[get_order]), app_name="shop")
        service = AiService(model, tools=[get_order], system_message=INSTRUCTION)
        question = Content(role="user", parts=(Part.from_text(QUESTION),))
        sse = RunConfig(streaming_mode=StreamingMode.SSE)
        sessions = iter(range(10**9))

        def bare() -> None:
            for request in (first_request, answer_request):
                items: list[LlmResponse] = model.generate_content(request, stream=True).pipe(ops.to_list()).run()
                assert not items[-1].partial

        def agent() -> None:
            session_id = f"s{next(sessions)}"
            cpu_started = time.process_time()
            runner.session_service.create_session("shop", "u", session_id=session_id).run()
            elapsed_cpu[0] = time.process_time() - cpu_started
            started = time.perf_counter()
            events = runner.run_async("u", session_id, question, sse).pipe(ops.to_list()).run()
            elapsed[0] = time.perf_counter() - started
            assert events[-1].text() == "Order A17 shipped Tuesday.", events[-1]

        def service_turn() -> None:
            events = service.stream(QUESTION).pipe(ops.to_list()).run()
            assert events[-1].kind == "final_response", events[-1]

        elapsed = [0.0]
        elapsed_cpu = [0.0]  # the CPU time of the agent's session creation, taken off its turn's
        contenders: dict[str, Callable[[], None]] = {
            "2 bare model calls": bare,
            "agent turn (LlmAgent + InMemoryRunner)": agent,
            "service turn (AiService)": service_turn,
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        cpu: dict[str, list[float]] = {name: [] for name in contenders}
        for run in contenders.values():
            run()
        for _ in range(reps):
            for name, run in contenders.items():
                started, cpu_started = time.perf_counter(), time.process_time()
                run()
                took = time.perf_counter() - started
                cpu_took = time.process_time() - cpu_started
                times[name].append(elapsed[0] if run is agent else took)  # the agent's session creation is not timed
                cpu[name].append(cpu_took - elapsed_cpu[0] if run is agent else cpu_took)
    bare_ms = statistics.median(times["2 bare model calls"]) * 1e3
    bare_cpu_ms = statistics.median(cpu["2 bare model calls"]) * 1e3
    rows = []
    for name in contenders:
        ms = statistics.median(times[name]) * 1e3
        cpu_ms = statistics.median(cpu[name]) * 1e3
        rows.append({
            "contender": name,
            "median_ms": round(ms, 3),
            "overhead_ms_per_model_call": round((ms - bare_ms) / 2, 3),
            "median_cpu_ms": round(cpu_ms, 3),
            "cpu_overhead_ms_per_model_call": round((cpu_ms - bare_cpu_ms) / 2, 3),
        })
    return {"reps": reps, "rows": rows}
