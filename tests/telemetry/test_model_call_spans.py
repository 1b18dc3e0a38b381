"""One ``chat {model}`` span per model-call attempt, on both transports, over a real loopback server.

Checked: names, kind, GenAI attributes, parentage under the span current when the call was
subscribed (the I/O runs on another thread or loop), status per outcome (ok, 401, retried 503,
disposed), time to first chunk, and the GenAI metrics.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import reactivex
from opentelemetry.trace import SpanKind, StatusCode
from telemetry_support import Telemetry, parent_of, span_id
from wire import OPENAI

from rxllm import (
    AsyncHttpTransport,
    Content,
    GenerateContentConfig,
    HttpStatusError,
    HttpTransport,
    LlmRequest,
    Part,
    RetryPolicy,
    SseChatModel,
    UsageMetadata,
)
from rxllm._telemetry.otel import usage_attributes
from rxllm.testing import Hold, StubResponse, StubServer

REQUEST = LlmRequest(
    contents=(Content(role="user", parts=(Part.from_text("Where is order A17?"),)),),
    config=GenerateContentConfig(temperature=0.2, max_output_tokens=64, top_p=0.9, stop_sequences=("END",)),
)
WAIT = 10.0


@pytest.fixture(params=["threads", "asyncio"])
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    made: HttpTransport | AsyncHttpTransport = HttpTransport() if request.param == "threads" else AsyncHttpTransport()
    yield made
    made.close()


def model(server: StubServer, transport: HttpTransport | AsyncHttpTransport, **options: Any) -> SseChatModel:
    return OPENAI.model(server.url, transport=transport, **options)


class Result:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.error: Exception | None = None
        self.done = threading.Event()
        self.first = threading.Event()

    def on_next(self, item: Any) -> None:
        self.items.append(item)
        self.first.set()

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def on_completed(self) -> None:
        self.done.set()


def run_under_parent(telemetry: Telemetry, source: reactivex.Observable[Any]) -> tuple[Result, int]:
    """Subscribe inside a parent span (then leave it at once: the I/O goes on elsewhere); wait for the end."""
    result = Result()
    with telemetry.tracer.start_as_current_span("request handler") as parent:
        source.subscribe(result.on_next, result.on_error, result.on_completed)
    assert result.done.wait(WAIT)
    return result, span_id(parent)


def test_a_streamed_call_is_one_client_span_under_the_subscribers_span(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(OPENAI.response("It shipped ", "Tuesday."))
    result, parent = run_under_parent(telemetry, model(stub_server, transport).generate_content(REQUEST, stream=True))
    assert result.error is None and result.items[-1].text() == "It shipped Tuesday."
    assert sorted(s.name for s in telemetry.spans(2)) == ["chat gpt-test", "request handler"]
    chat = telemetry.span("chat gpt-test")
    assert chat.kind is SpanKind.CLIENT
    assert parent_of(chat) == parent
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "gpt-test"
    assert attributes["gen_ai.request.temperature"] == 0.2
    assert attributes["gen_ai.request.max_tokens"] == 64
    assert attributes["gen_ai.request.top_p"] == 0.9
    assert attributes["gen_ai.request.stop_sequences"] == ("END",)
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == int(stub_server.url.rsplit(":", 1)[1])
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["gen_ai.response.id"] == "chatcmpl-stub"  # the wire's id
    assert attributes["gen_ai.usage.input_tokens"] == 5
    assert attributes["gen_ai.usage.output_tokens"] == 3
    assert attributes["rxllm.attempt"] == 1
    assert attributes["rxllm.outcome"] == "ok"
    assert attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert chat.status.status_code is StatusCode.UNSET
    assert not any("gen_ai.input.messages" in key or "messages" in key for key in attributes)  # no content by default
    metrics = telemetry.metrics()
    tokens = {attrs["gen_ai.token.type"]: point.sum for attrs, point in metrics["gen_ai.client.token.usage"]}
    assert tokens == {"input": 5, "output": 3}
    [(duration_attrs, duration)] = metrics["gen_ai.client.operation.duration"]
    assert duration.count == 1 and "error.type" not in duration_attrs
    assert duration_attrs["gen_ai.request.model"] == "gpt-test"
    [(_, first_chunk)] = metrics["gen_ai.client.operation.time_to_first_chunk"]
    assert first_chunk.count == 1


def test_a_non_streamed_call_has_no_time_to_first_chunk(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(StubResponse.json(200, OPENAI.complete_body("It shipped.")))
    result, parent = run_under_parent(telemetry, model(stub_server, transport).generate_content(REQUEST, stream=False))
    assert result.error is None and result.items[-1].text() == "It shipped."
    telemetry.spans(2)
    chat = telemetry.span("chat gpt-test")
    attributes = dict(chat.attributes or {})
    assert parent_of(chat) == parent
    assert attributes["rxllm.stream"] is False
    assert attributes["gen_ai.response.id"] == "chatcmpl-stub"
    assert attributes["gen_ai.usage.input_tokens"] == 5
    assert "gen_ai.response.time_to_first_chunk" not in attributes
    assert "gen_ai.client.operation.time_to_first_chunk" not in telemetry.metrics()


def test_a_failed_call_is_an_error_span_with_the_status_as_error_type(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(StubResponse.json(401, {"error": {"message": "Incorrect API key provided"}}))
    result, _ = run_under_parent(telemetry, model(stub_server, transport).generate_content(REQUEST, stream=True))
    assert isinstance(result.error, HttpStatusError)
    telemetry.spans(2)
    chat = telemetry.span("chat gpt-test")
    assert chat.status.status_code is StatusCode.ERROR
    attributes = dict(chat.attributes or {})
    assert attributes["error.type"] == "401"
    assert attributes["rxllm.outcome"] == "error"
    assert "sk-" not in str(attributes) and "authorization" not in str(attributes).lower()
    [(duration_attrs, _)] = telemetry.metrics()["gen_ai.client.operation.duration"]
    assert duration_attrs["error.type"] == "401"


def test_a_retried_call_is_sibling_spans_one_per_attempt(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(StubResponse.json(503, {"error": {"message": "overloaded"}}), OPENAI.response("ok"))
    llm = model(stub_server, transport, retry_policy=RetryPolicy(base_delay=0.0))
    result, parent = run_under_parent(telemetry, llm.generate_content(REQUEST, stream=True))
    assert result.error is None and result.items[-1].text() == "ok"
    telemetry.spans(3)
    attempts = sorted(
        (s for s in telemetry.spans() if s.name == "chat gpt-test"), key=lambda s: (s.attributes or {})["rxllm.attempt"]
    )
    assert [(s.attributes or {})["rxllm.attempt"] for s in attempts] == [1, 2]
    assert [parent_of(s) for s in attempts] == [parent, parent]  # siblings under the subscriber's span
    assert attempts[0].status.status_code is StatusCode.ERROR
    assert (attempts[0].attributes or {})["error.type"] == "503"
    assert attempts[1].status.status_code is StatusCode.UNSET
    assert (attempts[1].attributes or {})["rxllm.outcome"] == "ok"


def test_a_disposed_call_ends_its_span_as_cancelled(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    release = threading.Event()
    stream = OPENAI.stream("first ", "second")
    stub_server.enqueue(StubResponse(body=[*stream[:2], Hold(release, timeout=5.0), *stream[2:]]))
    result = Result()
    with telemetry.tracer.start_as_current_span("request handler"):
        subscription = model(stub_server, transport).generate_content(REQUEST, stream=True).subscribe(
            result.on_next, result.on_error, result.on_completed
        )
    assert result.first.wait(WAIT)
    subscription.dispose()
    telemetry.spans(2)
    release.set()
    chat = telemetry.span("chat gpt-test")
    attributes = dict(chat.attributes or {})
    assert attributes["rxllm.outcome"] == "cancelled"
    assert chat.status.status_code is StatusCode.UNSET
    assert "error.type" not in attributes
    assert not result.done.is_set()  # nothing reached the subscriber after dispose


def test_message_contents_are_recorded_only_when_the_user_opts_in(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    import rxllm

    rxllm.configure_telemetry(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        capture_message_content=True,
    )
    stub_server.enqueue(OPENAI.response("It shipped."))
    run_under_parent(telemetry, model(stub_server, transport).generate_content(REQUEST, stream=True))
    telemetry.spans(2)
    attributes = dict(telemetry.span("chat gpt-test").attributes or {})
    assert "Where is order A17?" in str(attributes["gen_ai.input.messages"])
    assert "It shipped." in str(attributes["gen_ai.output.messages"])


def test_switched_off_no_span_and_no_metric(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    import rxllm

    rxllm.configure_telemetry(
        enabled=False, tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider
    )
    stub_server.enqueue(OPENAI.response("ok"))
    result, _ = run_under_parent(telemetry, model(stub_server, transport).generate_content(REQUEST, stream=True))
    assert result.error is None
    assert [s.name for s in telemetry.spans(1)] == ["request handler"]
    assert telemetry.metrics() == {}


def test_an_awaited_call_is_parented_under_the_awaiting_tasks_span(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(OPENAI.response("It shipped."), OPENAI.response("It shipped ", "Tuesday."))
    llm = model(stub_server, transport)

    async def handler() -> tuple[int, str, str]:
        with telemetry.tracer.start_as_current_span("async handler") as parent:
            final = await llm.generate_content(REQUEST, stream=True)
            pieces = [r.text() async for r in llm.generate_content(REQUEST, stream=True) if r.partial]
        return span_id(parent), final.text(), "".join(pieces)

    parent, text, streamed = asyncio.run(handler())
    assert (text, streamed) == ("It shipped.", "It shipped Tuesday.")
    telemetry.spans(3)
    chats = [s for s in telemetry.spans() if s.name == "chat gpt-test"]
    assert [parent_of(s) for s in chats] == [parent, parent]


class _Span:
    def __init__(self) -> None:
        self.attributes: dict[str, object] = {}

    def set_attribute(self, key: str, value: object) -> None:
        self.attributes[key] = value


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, {}),
        (UsageMetadata(total_token_count=9), {}),
        (UsageMetadata(prompt_token_count=5), {"gen_ai.usage.input_tokens": 5}),
        (
            UsageMetadata(
                prompt_token_count=5, candidates_token_count=3, cached_content_token_count=2, thoughts_token_count=7
            ),
            {
                "gen_ai.usage.input_tokens": 5,
                "gen_ai.usage.output_tokens": 3,
                "gen_ai.usage.cache_read.input_tokens": 2,
                "rxllm.usage.thoughts_tokens": 7,
            },
        ),
    ],
)
def test_usage_attributes_are_the_same_on_every_span(usage: UsageMetadata | None, expected: dict[str, object]) -> None:
    # One mapping for the model call's span, the agent run's and the service turn's.
    span = _Span()
    usage_attributes(span, usage)
    assert span.attributes == expected
