"""The httpx2-era test tools, as their users use them, on rxllm's default transports (httpx2 clients).

* httpx2-pytest (the successor of pytest-httpx; fixture ``httpx2_mock``) patches httpx2's
  ``HTTPTransport`` / ``AsyncHTTPTransport``: it serves rxllm's streams and records its requests.
* pytest-httpx2 (also fixture ``httpx2_mock``) is respx with a mocker for httpcore2. It installs
  the same import package as httpx2-pytest (``pytest_httpx2``), so one venv holds one of them; this
  suite installs httpx2-pytest and builds here, as pytest-httpx2 1.0.0 does, the respx router its
  fixture yields.
* vcrpy records a stream and replays it with the upstream gone, on both transports and both stacks
  (vcrpy 9.4 patches httpx2's transports as it patches httpx's).

The httpx-era tools on a legacy ``httpx`` client are in ``test_faults_httpx_ecosystem.py``;
OpenTelemetry on both stacks is in ``tests/telemetry/test_trace_context.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults_support import REQUEST, TRANSPORT_KINDS, Recorder
from stacks_support import STACKS, transport_on
from wire import OPENAI

from rxllm import AsyncHttpTransport, HttpTransport, LlmResponse, RetryPolicy, StreamTimeoutError, TransportError
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubServer

API = "https://api.rxllm.test/v1"
EVENTS = OPENAI.stream("Hello", " world")
BODY = b"".join(EVENTS)
SSE = {"content-type": "text/event-stream"}
EXPECTED = [("Hello", True), (" world", True), ("Hello world", None)]


def _texts(items: list[LlmResponse]) -> list[tuple[str, bool | None]]:
    return [(r.text(), r.partial) for r in items]


def _run(model: OpenAiChatModel) -> Recorder:
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait("a mocked or recorded stream")
    return recorder


@pytest.fixture(params=TRANSPORT_KINDS)
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    """A default transport: rxllm's own httpx2 clients."""
    with transport_on(str(request.param)) as made:
        yield made


def _model(transport: HttpTransport | AsyncHttpTransport, **options: Any) -> OpenAiChatModel:
    return OpenAiChatModel("gpt-test", base_url=API, api_key="sk-test-123456", transport=transport, **options)


# --- httpx2-pytest ------------------------------------------------------------------------------------


def test_httpx2_pytest_serves_a_stream_and_sees_the_request(
    httpx2_mock: Any, transport: HttpTransport | AsyncHttpTransport
) -> None:
    httpx2_mock.add_response(url=f"{API}/chat/completions", method="POST", content=BODY, headers=SSE)
    recorder = _run(_model(transport))
    assert recorder.errors == [] and _texts(recorder.items) == EXPECTED
    (sent,) = httpx2_mock.get_requests()
    assert sent.headers["authorization"] == "Bearer sk-test-123456"
    assert json.loads(sent.content)["stream"] is True


def test_httpx2_pytest_streams_a_body_given_piece_by_piece(
    httpx2_mock: Any, transport: HttpTransport | AsyncHttpTransport
) -> None:
    from pytest_httpx2 import IteratorStream

    httpx2_mock.add_response(url=f"{API}/chat/completions", stream=IteratorStream(EVENTS), headers=SSE)
    recorder = _run(_model(transport))
    assert recorder.errors == [] and _texts(recorder.items) == EXPECTED


def test_httpx2_pytest_a_mocked_connection_error_is_a_transport_error(
    httpx2_mock: Any, transport: HttpTransport | AsyncHttpTransport
) -> None:
    import httpx2

    httpx2_mock.add_exception(httpx2.ConnectError("connection refused"))
    recorder = _run(_model(transport, retry_policy=RetryPolicy.never()))
    assert recorder.items == [] and len(recorder.errors) == 1
    assert isinstance(recorder.errors[0], TransportError), recorder.errors


# --- respx on httpx2, as pytest-httpx2 users get it ---------------------------------------------------


@pytest.fixture
def respx_httpx2_mock() -> Iterator[Any]:
    """What pytest-httpx2 1.0.0's ``httpx2_mock`` fixture yields: a respx router over httpcore2, by a
    respx mocker named ``httpcore2`` that patches httpcore2's pools and connections (the plugin
    registers the same class; respx refuses a second class of one name, hence the guard)."""
    import respx
    from respx.mocks import HTTPCoreMocker, Mocker

    if "httpcore2" not in Mocker.registry:

        class HTTPCore2Mocker(HTTPCoreMocker):
            name = "httpcore2"
            targets = [  # noqa: RUF012 (respx's own class attribute)
                "httpcore2._sync.connection.HTTPConnection",
                "httpcore2._sync.connection_pool.ConnectionPool",
                "httpcore2._sync.http_proxy.HTTPProxy",
                "httpcore2._async.connection.AsyncHTTPConnection",
                "httpcore2._async.connection_pool.AsyncConnectionPool",
                "httpcore2._async.http_proxy.AsyncHTTPProxy",
            ]

    with respx.mock(using="httpcore2", assert_all_called=True) as router:
        yield router


def test_respx_on_httpcore2_serves_a_stream_and_sees_the_request(
    respx_httpx2_mock: Any, transport: HttpTransport | AsyncHttpTransport
) -> None:
    import httpx  # respx's routes speak httpx's types, whatever client sent the request

    route = respx_httpx2_mock.post(f"{API}/chat/completions").mock(
        return_value=httpx.Response(200, content=BODY, headers=SSE)
    )
    recorder = _run(_model(transport))
    assert recorder.errors == [] and _texts(recorder.items) == EXPECTED
    assert route.call_count == 1
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-test-123456"


@pytest.mark.parametrize("raised", ["ConnectError", "ConnectTimeout"])
def test_respx_on_httpcore2_an_httpx_side_effect_is_mapped_like_a_real_failure(
    respx_httpx2_mock: Any, transport: HttpTransport | AsyncHttpTransport, raised: str
) -> None:
    """respx raises a route's ``side_effect`` (httpx's exceptions, in respx's docs) from inside the
    httpx2 client's pool: rxllm maps it as it maps httpx2's own."""
    import httpx

    route = respx_httpx2_mock.post(f"{API}/chat/completions").mock(side_effect=getattr(httpx, raised)("refused"))
    recorder = _run(_model(transport, retry_policy=RetryPolicy.never()))
    assert recorder.items == [] and route.call_count == 1
    (error,) = recorder.errors
    assert isinstance(error, TransportError), repr(error)
    if raised == "ConnectTimeout":
        assert isinstance(error, StreamTimeoutError) and error.limit == "connect"
    assert "sk-test-123456" not in str(error)


# --- vcrpy: record, then replay with the upstream gone ------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_vcrpy_records_a_stream_and_replays_it_with_the_upstream_gone(tmp_path: Path, kind: str, stack: str) -> None:
    import vcr

    cassette = str(tmp_path / "stream.yaml")
    recorder_vcr = vcr.VCR(record_mode="once")
    with StubServer([OPENAI.response("Hello", " world")]) as server:
        url = server.url
        with transport_on(kind, stack) as transport, recorder_vcr.use_cassette(cassette):
            live = _run(OPENAI.model(url, transport=transport))
    assert len(server.requests) == 1 and Path(cassette).exists(), "nothing was recorded"
    with transport_on(kind, stack) as transport, recorder_vcr.use_cassette(cassette) as played:
        # the server is closed: only the cassette answers
        replayed = _run(OPENAI.model(url, transport=transport, retry_policy=RetryPolicy.never()))
        assert played.play_count == 1
    assert live.errors == [] and replayed.errors == []
    assert _texts(replayed.items) == _texts(live.items) == EXPECTED
    assert replayed.items[-1] == live.items[-1]
