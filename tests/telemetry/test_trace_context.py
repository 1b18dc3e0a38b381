"""The W3C trace context rxllm puts on the wire, as the server sees it, on both HTTP stacks.

Each attempt's request carries ``traceparent`` naming that attempt's ``chat {model}`` span, on
rxllm's own httpx2 clients and on a legacy ``httpx`` client a user passes, on both transports.
With OpenTelemetry's httpx or httpx2 instrumentation also running, the wire still carries exactly
one ``traceparent``: the instrumentation's client span, itself a child of rxllm's span. With
telemetry off, or no provider set, no header is added at all.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context
from reactivex import operators as ops
from stacks_support import KINDS, STACKS, transport_on
from telemetry_support import Telemetry, parent_of, span_id
from wire import OPENAI

import rxllm
from rxllm import LlmResponse, RetryPolicy
from rxllm.testing import RecordedRequest, StubResponse, StubServer

REQUEST = rxllm.LlmRequest(contents=(rxllm.Content(role="user", parts=(rxllm.Part.from_text("Where is A17?"),)),))
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def run(telemetry: Telemetry | None, model: Any) -> tuple[list[LlmResponse], Any]:
    """Stream one call subscribed inside a ``request handler`` span (none without ``telemetry``);
    returns the items and that span."""
    with contextlib.ExitStack() as spans:
        parent = spans.enter_context(telemetry.tracer.start_as_current_span("request handler")) if telemetry else None
        items: list[LlmResponse] = model.generate_content(REQUEST, stream=True).pipe(ops.to_list()).run()
    return items, parent


def traceparent(recorded: RecordedRequest) -> tuple[int, int]:
    """The trace id and parent span id of the one ``traceparent`` the server received (a repeated
    header arrives joined with ``", "`` and does not match)."""
    value = recorded.headers.get("traceparent")
    assert value is not None, f"no traceparent on the wire: {dict(recorded.headers)}"
    match = TRACEPARENT.fullmatch(value)
    assert match is not None, f"not exactly one W3C traceparent: {value!r}"
    return int(match[1], 16), int(match[2], 16)


def chat_spans(telemetry: Telemetry, count: int) -> list[Any]:
    spans = [s for s in telemetry.spans(count) if s.name == "chat gpt-test"]
    return sorted(spans, key=lambda s: (s.attributes or {})["rxllm.attempt"])


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("kind", KINDS)
def test_each_attempt_sends_its_own_span_as_the_traceparent(
    telemetry: Telemetry, stub_server: StubServer, kind: str, stack: str
) -> None:
    stub_server.enqueue(StubResponse.json(503, {"error": {"message": "overloaded"}}), OPENAI.response("ok"))
    with transport_on(kind, stack) as transport:
        model = OPENAI.model(stub_server.url, transport=transport, retry_policy=RetryPolicy(base_delay=0.0))
        items, parent = run(telemetry, model)
    assert items[-1].text() == "ok"
    attempts = chat_spans(telemetry, 3)
    assert [parent_of(s) for s in attempts] == [span_id(parent)] * 2
    trace_id = parent.get_span_context().trace_id
    sent = [traceparent(r) for r in stub_server.requests]
    assert sent == [(trace_id, span_id(attempts[0])), (trace_id, span_id(attempts[1]))]


@pytest.mark.parametrize("kind", KINDS)
def test_the_baggage_goes_too_and_a_header_of_the_same_name_is_replaced(
    telemetry: Telemetry, stub_server: StubServer, kind: str
) -> None:
    stub_server.enqueue(OPENAI.response("ok"))
    with transport_on(kind, "httpx2") as transport:
        model = OPENAI.model(stub_server.url, transport=transport, extra_headers={"TraceParent": "00-stale"})
        token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
        try:
            items, parent = run(telemetry, model)
        finally:
            otel_context.detach(token)
    assert items[-1].text() == "ok"
    (chat,) = chat_spans(telemetry, 2)
    (recorded,) = stub_server.requests
    assert traceparent(recorded) == (parent.get_span_context().trace_id, span_id(chat))
    assert recorded.headers["baggage"] == "tenant=acme"


@pytest.mark.parametrize("kind", KINDS)
def test_with_telemetry_off_or_no_provider_no_header_is_added(stub_server: StubServer, kind: str) -> None:
    stub_server.enqueue(OPENAI.response("off"), OPENAI.response("unset"))
    with transport_on(kind, "httpx2") as transport:
        model = OPENAI.model(stub_server.url, transport=transport)
        rxllm.configure_telemetry(enabled=False)
        try:
            off, _ = run(None, model)
        finally:
            rxllm.configure_telemetry()
        unset, _ = run(None, model)  # the API is installed, but this process set no provider
    assert off[-1].text() == "off" and unset[-1].text() == "unset"
    assert [r.headers.get("traceparent") for r in stub_server.requests] == [None, None]


@contextlib.contextmanager
def instrumented(stack: str, telemetry: Telemetry) -> Iterator[None]:
    """OpenTelemetry's HTTP client instrumentation of ``stack`` (one package covers both: httpx's
    ``HTTPXClientInstrumentor`` and httpx2's ``HTTPX2ClientInstrumentor``)."""
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor

    instrumentor = HTTPX2ClientInstrumentor() if stack == "httpx2" else HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("kind", KINDS)
def test_under_the_http_instrumentation_the_wire_carries_one_traceparent_its_client_span(
    telemetry: Telemetry, stub_server: StubServer, kind: str, stack: str
) -> None:
    stub_server.enqueue(OPENAI.response("Hello", " world"))
    with transport_on(kind, stack) as transport, instrumented(stack, telemetry):
        items, parent = run(telemetry, OPENAI.model(stub_server.url, transport=transport))
    assert items[-1].text() == "Hello world"
    spans = telemetry.spans(3)
    (chat,) = chat_spans(telemetry, 3)
    (http,) = [s for s in spans if s.name.startswith("POST")]
    assert parent_of(chat) == span_id(parent) and parent_of(http) == span_id(chat)
    (recorded,) = stub_server.requests
    assert traceparent(recorded) == (parent.get_span_context().trace_id, span_id(http))
