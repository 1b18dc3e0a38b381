"""The default transports are plain httpx underneath: the tools that patch
httpx see them (pytest-httpx, respx, vcrpy, OpenTelemetry), a client you built can be passed as
``http_client=`` (never closed by rxllm; disposal still closes the connection), environment proxies
are honoured like httpx does, and an ``AsyncHttpTransport`` can run on your own loop."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, LoopbackRelay, Recorder, make_transport, relay
from wire import OPENAI

from rxllm import AsyncHttpTransport, HttpTransport, LlmResponse, RetryPolicy
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Hold, StubResponse, StubServer

API = "https://api.rxllm.test/v1"
BODY = b"".join(OPENAI.stream("Hello", " world"))
SSE = {"content-type": "text/event-stream"}


def _texts(items: list[LlmResponse]) -> list[tuple[str, bool | None]]:
    return [(r.text(), r.partial) for r in items]


def _run(model: OpenAiChatModel) -> Recorder:
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait("a mocked or recorded stream")
    return recorder


EXPECTED = [("Hello", True), (" world", True), ("Hello world", None)]


@pytest.fixture(params=TRANSPORT_KINDS)
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    made = make_transport(str(request.param))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(params=TRANSPORT_KINDS)
def legacy_transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    """A transport over a legacy ``httpx`` client the test built (the tools below patch httpx, not httpx2)."""
    made: HttpTransport | AsyncHttpTransport
    if request.param == "threads":
        client: httpx.Client | httpx.AsyncClient = httpx.Client()
        made = HttpTransport(http_client=client)
    else:
        client = httpx.AsyncClient()
        made = AsyncHttpTransport(http_client=client)
    try:
        yield made
    finally:
        if isinstance(client, httpx.AsyncClient):  # the client is the test's: it closes it, on its loop
            assert isinstance(made, AsyncHttpTransport)
            asyncio.run_coroutine_threadsafe(client.aclose(), made.loop).result(TIMEOUT)
        made.close()
        if isinstance(client, httpx.Client):
            client.close()


# --- the tools that patch httpx, on a legacy httpx client you pass --------------------------------------


def test_pytest_httpx_mocks_a_legacy_httpx_client_you_pass(
    httpx_mock: Any, legacy_transport: HttpTransport | AsyncHttpTransport
) -> None:
    httpx_mock.add_response(url=f"{API}/chat/completions", content=BODY, headers=SSE)
    recorder = _run(OpenAiChatModel("gpt-test", base_url=API, api_key="sk-test-123456", transport=legacy_transport))
    assert recorder.errors == [] and _texts(recorder.items) == EXPECTED
    (sent,) = httpx_mock.get_requests()
    assert sent.headers["authorization"] == "Bearer sk-test-123456"


def test_respx_mocks_a_legacy_httpx_client_you_pass(legacy_transport: HttpTransport | AsyncHttpTransport) -> None:
    import respx

    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{API}/chat/completions").mock(return_value=httpx.Response(200, content=BODY, headers=SSE))
        recorder = _run(OpenAiChatModel("gpt-test", base_url=API, api_key="sk-test", transport=legacy_transport))
    assert recorder.errors == [] and _texts(recorder.items) == EXPECTED and route.call_count == 1


def test_vcrpy_records_a_stream_and_replays_it_with_the_upstream_gone(tmp_path: Path) -> None:
    import vcr

    cassette = str(tmp_path / "stream.yaml")
    recorder_vcr = vcr.VCR(record_mode="once")
    with StubServer([OPENAI.response("Hello", " world")]) as server:
        url = server.url
        transport = HttpTransport(max_concurrent_streams=2)
        try:
            with recorder_vcr.use_cassette(cassette):
                live = _run(OPENAI.model(url, transport=transport))
        finally:
            transport.close()
    assert Path(cassette).exists(), "nothing was recorded"
    transport = HttpTransport(max_concurrent_streams=2)
    try:
        with recorder_vcr.use_cassette(cassette):  # the server is closed: only the cassette answers
            replayed = _run(OPENAI.model(url, transport=transport, retry_policy=RetryPolicy.never()))
    finally:
        transport.close()
    assert live.errors == [] and replayed.errors == []
    assert _texts(replayed.items) == _texts(live.items) == EXPECTED
    assert replayed.items[-1] == live.items[-1]


def test_opentelemetry_sees_each_request_of_a_legacy_httpx_client_under_the_subscribers_span(
    legacy_transport: HttpTransport | AsyncHttpTransport,
) -> None:
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with StubServer([OPENAI.response("Hello", " world")]) as server:
            with provider.get_tracer("test").start_as_current_span("user-request") as parent:
                recorder = Recorder()
                recorder.subscribe(OPENAI.model(server.url, transport=legacy_transport).generate_content(REQUEST,
                                                                                                  stream=True))
            recorder.wait("an instrumented stream")
    finally:
        instrumentor.uninstrument()
    assert recorder.errors == [] and _texts(recorder.items) == EXPECTED
    trace_id = format(parent.get_span_context().trace_id, "032x")
    assert trace_id in server.requests[0].headers.get("traceparent", ""), server.requests[0].headers
    client_spans = [s for s in exporter.get_finished_spans() if s.name.startswith("POST")]
    assert len(client_spans) == 1, [s.name for s in exporter.get_finished_spans()]
    (span,) = client_spans
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id


# --- bring your own client ----------------------------------------------------------------------------


def test_a_sync_client_you_built_is_used_and_never_closed() -> None:
    seen: list[str] = []
    client = httpx.Client(headers={"X-Team": "search"}, event_hooks={"request": [lambda r: seen.append(r.url.path)]})
    with StubServer([OPENAI.response("Hello", " world")]) as server:
        model = OPENAI.model(server.url, http_client=client)
        recorder = _run(model)
        model._transport.close()  # type: ignore[union-attr]
    assert recorder.errors == [] and _texts(recorder.items) == EXPECTED
    assert server.requests[0].headers["x-team"] == "search" and seen == ["/v1/chat/completions"]
    assert not client.is_closed
    client.close()


@pytest.mark.parametrize("phase", ["headers", "mid-body"])
@pytest.mark.parametrize("client_kind", ["Client", "AsyncClient"])
def test_dispose_closes_the_connection_of_a_client_you_built(phase: str, client_kind: str) -> None:
    release = threading.Event()
    client: httpx.Client | httpx.AsyncClient = httpx.Client() if client_kind == "Client" else httpx.AsyncClient()
    events = OPENAI.stream("Hello", " world")
    if phase == "headers":
        response = StubResponse(body=events, before_headers=[Hold(release, timeout=30.0)])
    else:
        response = StubResponse(body=[*events[:2], Hold(release, timeout=30.0), *events[2:]])
    try:
        with StubServer([OPENAI.response("warm"), response]) as server:
            model = OPENAI.model(server.url, http_client=client, retry_policy=RetryPolicy.never())
            _run(model)  # a keep-alive connection now waits in the client's pool: it is reused
            recorder = Recorder(notify_after=1)
            subscription = recorder.subscribe(model.generate_content(REQUEST, stream=True))
            assert server.wait_for_requests(2, timeout=TIMEOUT)
            if phase == "mid-body":
                assert recorder.reached.wait(TIMEOUT)
            subscription.dispose()
            connection = server.connections[-1]
            assert connection.wait_closed_by_client(TIMEOUT), f"the server never saw the close ({phase})"
    finally:
        release.set()
    assert not client.is_closed
    model._transport.close()  # type: ignore[union-attr]  # rxllm's side only: the client stays open
    assert not client.is_closed
    if isinstance(client, httpx.Client):
        client.close()


def test_closing_the_transport_right_after_a_dispose_leaves_no_connection_in_your_client() -> None:
    """The transport's close() stops a disposed stream as the dispose did (socket shut down, task
    left to clean up): cancelling it inside httpcore's cleanup left the connection ACTIVE in the
    pool of the client you passed, its socket open, in about 1 of 50 cycles (CI caught one)."""
    cycles = 60
    releases = [threading.Event() for _ in range(cycles)]
    events = OPENAI.stream("Hello", " world")
    held = [StubResponse(body=[*events[:2], Hold(r, timeout=30.0), *events[2:]]) for r in releases]
    left: list[int] = []
    try:
        with StubServer(held) as server:
            for _ in range(cycles):
                client = httpx.AsyncClient()
                model = OPENAI.model(server.url, http_client=client, retry_policy=RetryPolicy.never())
                recorder = Recorder(notify_after=1)
                subscription = recorder.subscribe(model.generate_content(REQUEST, stream=True))
                assert recorder.reached.wait(TIMEOUT)
                subscription.dispose()
                model._transport.close()  # type: ignore[union-attr]  # at once: the stream is still cleaning up
                left.append(len(client._transport._pool.connections))  # type: ignore[attr-defined]
    finally:
        for release in releases:
            release.set()
    assert left == [0] * cycles, left
    assert all(connection.wait_closed_by_client(TIMEOUT) for connection in server.connections)


def test_an_async_client_you_built_runs_on_your_loop_with_no_thread_of_ours() -> None:
    with StubServer([OPENAI.response("Hello", " world")]) as server:

        async def main() -> tuple[LlmResponse, set[str], bool]:
            threads: set[str] = set()
            async with httpx.AsyncClient(headers={"X-Team": "search"}) as client:
                model = OPENAI.model(server.url, http_client=client)
                source = model.generate_content(REQUEST, stream=True)
                done = asyncio.get_running_loop().create_future()
                items: list[LlmResponse] = []

                def on_next(item: LlmResponse) -> None:
                    threads.add(threading.current_thread().name)
                    items.append(item)

                source.subscribe(on_next, done.set_exception, lambda: done.set_result(None))
                await asyncio.wait_for(done, TIMEOUT)
                await model._transport.aclose()  # type: ignore[union-attr]
                return items[-1], threads, client.is_closed

        final, threads, closed = asyncio.run(main())
    assert final.text() == "Hello world" and threads == {"MainThread"} and not closed
    assert not any(t.name == "rxllm-asyncio" for t in threading.enumerate())
    assert server.requests[0].headers["x-team"] == "search"


def test_a_wrong_http_client_is_a_configuration_error() -> None:
    from rxllm import ConfigurationError

    with pytest.raises(ConfigurationError):
        OpenAiChatModel("m", base_url="http://127.0.0.1:1/v1", http_client=object())
    with pytest.raises(ConfigurationError):
        OpenAiChatModel("m", base_url="http://127.0.0.1:1/v1", http_client=httpx.Client(),
                        transport=HttpTransport())


# --- environment proxies ------------------------------------------------------------------------------


class ForwardProxy(LoopbackRelay):
    """A tiny HTTP forward proxy on loopback: reads one absolute-form request per connection, relays
    it (origin-form) to the upstream, then relays bytes both ways until either side closes."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        super().__init__("http", "forward-proxy")

    def _handle(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(65536)
            if not data:
                client.close()
                return
            head += data
        line, rest = head.split(b"\r\n", 1)
        method, target, version = line.split(b" ", 2)
        self.targets.append(target.decode())
        url = httpx.URL(target.decode())
        upstream = socket.create_connection((url.host, url.port or 80))
        upstream.sendall(b" ".join([method, url.raw_path, version]) + b"\r\n" + rest)
        relay(client, upstream)


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    made = ForwardProxy()
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_both_transports_honour_http_proxy_and_no_proxy_like_httpx(
    kind: str, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with StubServer([OPENAI.response("via", " proxy"), OPENAI.response("direct")]) as server:
        transport = make_transport(kind)
        try:
            proxied = _run(OPENAI.model(server.url, transport=transport))
        finally:
            transport.close()
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        transport = make_transport(kind)
        try:
            direct = _run(OPENAI.model(server.url, transport=transport))
        finally:
            transport.close()
    assert proxied.errors == [] and proxied.items[-1].text() == "via proxy"
    assert direct.errors == [] and direct.items[-1].text() == "direct"
    assert proxy.targets == [f"{server.url}/v1/chat/completions"]


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_dispose_mid_body_through_a_proxy_closes_the_upstream_connection(
    kind: str, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    release = threading.Event()
    events = OPENAI.stream("Hello", " world")
    transport = make_transport(kind)
    try:
        with StubServer([StubResponse(body=[*events[:2], Hold(release, timeout=30.0), *events[2:]])]) as server:
            recorder = Recorder(notify_after=1)
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            subscription = recorder.subscribe(model.generate_content(REQUEST, stream=True))
            assert recorder.reached.wait(TIMEOUT)
            subscription.dispose()
            assert server.connections[-1].wait_closed_by_client(TIMEOUT), "the upstream never saw the close"
    finally:
        release.set()
        transport.close()
    assert len(proxy.targets) == 1


# --- one DEBUG line per request, the same on both transports -------------------------------------------


def test_both_transports_log_one_redacted_debug_line_per_request(
    transport: HttpTransport | AsyncHttpTransport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rxllm.http")
    with StubServer([StubResponse.json(503, {"error": {"message": "busy"}}), OPENAI.response("ok")]) as server:
        model = OpenAiChatModel("gpt-test", base_url=f"{server.url}/v1?token=tok-9876543210", api_key="sk-test-123456",
                                transport=transport, retry_policy=RetryPolicy(base_delay=0.01))
        recorder = _run(model)
    assert recorder.errors == [] and recorder.items[-1].text() == "ok"
    lines = [r.getMessage() for r in caplog.records if r.name == "rxllm.http"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("POST http://127.0.0.1:") and "-> 503 in " in lines[0] and "attempt 1" in lines[0]
    assert "-> 200 in " in lines[1] and "attempt 2" in lines[1]
    assert all("tok-9876543210" not in line and "sk-test-123456" not in line for line in lines)


def test_an_asyncio_transport_bound_to_your_loop_cancels_on_dispose_with_no_thread_of_ours() -> None:
    release = threading.Event()
    events = OPENAI.stream("Hello", " world")
    with StubServer([StubResponse(body=[*events[:2], Hold(release, timeout=30.0), *events[2:]])]) as server:

        async def main() -> tuple[set[str], bool]:
            transport = AsyncHttpTransport(loop=asyncio.get_running_loop(), max_concurrent_streams=4)
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            first = asyncio.get_running_loop().create_future()
            threads: set[str] = set()

            def on_next(item: LlmResponse) -> None:
                threads.add(threading.current_thread().name)
                if not first.done():
                    first.set_result(item)

            subscription = model.generate_content(REQUEST, stream=True).subscribe(on_next, lambda e: None)
            await asyncio.wait_for(first, TIMEOUT)
            subscription.dispose()
            closed = await asyncio.to_thread(server.connections[-1].wait_closed_by_client, TIMEOUT)
            await transport.aclose()
            return threads, closed

        try:
            threads, closed = asyncio.run(main())
        finally:
            release.set()
    assert threads == {"MainThread"} and closed
    assert not any(t.name == "rxllm-asyncio" for t in threading.enumerate())


class _HeldStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A mocked body: the first events, then nothing until released (then the rest)."""

    def __init__(self, events: list[bytes], release: threading.Event) -> None:
        self._events = events
        self._release = release
        self.over = threading.Event()  # the reader is done with the body (read to the end or closed)

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._events[:2]
            self._release.wait(TIMEOUT)
            yield from self._events[2:]
        finally:
            self.over.set()

    async def __aiter__(self) -> Any:
        try:
            for event in self._events[:2]:
                yield event
            await asyncio.to_thread(self._release.wait, TIMEOUT)
            for event in self._events[2:]:
                yield event
        finally:
            self.over.set()


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_dispose_on_a_mocked_transport_stops_every_emission_at_once(kind: str) -> None:
    release = threading.Event()
    events = OPENAI.stream("Hello", " world", "!")

    body = _HeldStream(events, release)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, stream=body)

    client: httpx.Client | httpx.AsyncClient
    client = httpx.Client(transport=httpx.MockTransport(handler)) if kind == "threads" else httpx.AsyncClient(
        transport=httpx.MockTransport(handler))
    model = OpenAiChatModel("gpt-test", base_url=API, api_key="sk-test", http_client=client,
                            retry_policy=RetryPolicy.never())
    recorder = Recorder(notify_after=1)
    subscription = recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert recorder.reached.wait(TIMEOUT)
    subscription.dispose()
    seen = list(recorder.items)
    release.set()  # the mock now sends the rest: none of it may arrive
    assert body.over.wait(TIMEOUT), "the body was never closed"
    model._transport.close()  # type: ignore[union-attr]
    assert [r.text() for r in seen] == ["Hello"] and recorder.items == seen
    assert recorder.errors == [] and not recorder.completed


def test_a_closed_or_foreign_http_client_is_a_configuration_error_naming_what_is_accepted() -> None:
    import http.client
    import re

    from rxllm import ConfigurationError

    closed = httpx.Client()
    closed.close()
    with pytest.raises(ConfigurationError, match="http_client is closed"):
        OpenAiChatModel("m", base_url="http://127.0.0.1:1/v1", http_client=closed)
    with pytest.raises(ConfigurationError, match="http_client is closed"):
        HttpTransport(http_client=closed)
    foreign = http.client.HTTPConnection("127.0.0.1", 1)  # another library's client
    accepted = "httpx2.Client or httpx2.AsyncClient (or its legacy httpx counterpart), got http.client"
    with pytest.raises(ConfigurationError, match=re.escape(accepted)):
        OpenAiChatModel("m", base_url="http://127.0.0.1:1/v1", http_client=foreign)
    with pytest.raises(ConfigurationError, match=re.escape("goes to HttpTransport")):
        AsyncHttpTransport(http_client=httpx.Client())  # type: ignore[arg-type]


def test_a_mocked_client_whose_body_is_not_a_stream_ends_in_an_error_not_a_hang() -> None:
    from rxllm import TransportError

    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json={"ok": True})))
    model = OpenAiChatModel("m", base_url="http://127.0.0.1:1/v1", api_key="sk-x", http_client=client)
    with pytest.raises(TransportError, match="http_client returned a body that cannot be streamed"):
        model.generate_content(REQUEST, stream=True).run()
    assert not client.is_closed
    client.close()


def test_a_mocked_async_client_whose_body_is_not_a_stream_ends_in_an_error_not_a_hang() -> None:
    from rxllm import TransportError

    async def main() -> None:
        client = httpx.AsyncClient(
            transport=httpx.MockTransport(lambda request: httpx.Response(200, json={"ok": True})))
        model = OpenAiChatModel("m", base_url="http://127.0.0.1:1/v1", api_key="sk-x", http_client=client)
        with pytest.raises(TransportError, match="http_client returned a body that cannot be streamed"):
            await model.generate_content(REQUEST, stream=True)
        assert not client.is_closed
        await client.aclose()

    asyncio.run(main())
