"""A body that fails while it is read ends in rxllm's own error, chained to a bare copy of the
library's (httpx attaches the request, its ``Authorization`` header included, to the errors of a
body read), on both transports; an error from below httpx (a user's transport letting the socket's
or httpcore's errors through) is mapped too, never raised bare.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpcore2
import httpx2
import pytest
from faults_support import REQUEST, TRANSPORT_KINDS, Recorder, make_transport
from wire import OPENAI

from rxllm import AsyncHttpTransport, HttpTransport, RetryPolicy, StreamInterruptedError
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Disconnect, StubResponse, StubServer

KEY = "sk-body-0123456789abcdef"


def _run(model: Any) -> Recorder:
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait("a call")
    return recorder


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _assert_detached(error: BaseException) -> None:
    chain = _chain(error)
    assert len(chain) >= 2, "the library's error is no longer chained (keep the cause, sanitised)"
    for link in chain[1:]:
        assert link.__traceback__ is None and link.__context__ is None
        try:
            request = link.request  # type: ignore[attr-defined]
        except (RuntimeError, AttributeError):  # httpx's "The .request property has not been set."
            request = None
        assert request is None, f"{type(link).__name__} holds the request (and its headers)"
        assert KEY not in str(link) and KEY not in repr(link)


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "fin"])
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_body_that_breaks_off_chains_no_request(kind: str, reset: bool) -> None:
    events = OPENAI.stream("Hallo ", "Welt")
    with StubServer([StubResponse(body=[*events[:2], Disconnect(reset=reset)], chunked=True)]) as server:
        transport = make_transport(kind)
        try:
            recorder = _run(OpenAiChatModel("m", base_url=f"{server.url}/v1", api_key=KEY, transport=transport,
                                            retry_policy=RetryPolicy.never()))
        finally:
            transport.close()
    (error,) = recorder.errors
    assert isinstance(error, StreamInterruptedError), repr(error)
    _assert_detached(error)


class _Body(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A body that yields one event, then fails with ``failure`` (raised from below httpx's mapping)."""

    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    def __iter__(self) -> Iterator[bytes]:
        yield OPENAI.stream("Hallo")[0]
        raise self.failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield OPENAI.stream("Hallo")[0]
        raise self.failure


class _Failing(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    def __init__(self, failure: Exception) -> None:
        self.failure = failure
        self.requests = 0

    def _response(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Body(self.failure),
                               request=request)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self._response(request)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return self._response(request)


@pytest.mark.parametrize("failure", [OSError(104, "Connection reset by peer"), httpcore2.ReadError("peer gone"),
                                     httpcore2.RemoteProtocolError("bad chunk")], ids=["oserror", "read", "protocol"])
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_an_error_from_below_httpx_is_mapped(kind: str, failure: Exception) -> None:
    fake = _Failing(failure)
    transport: HttpTransport | AsyncHttpTransport
    with contextlib.ExitStack() as stack:
        if kind == "threads":
            client: Any = stack.enter_context(httpx2.Client(transport=fake))
            transport = HttpTransport(http_client=client)
        else:
            client = httpx2.AsyncClient(transport=fake)
            transport = AsyncHttpTransport(http_client=client)
        stack.callback(transport.close)
        recorder = _run(OpenAiChatModel("m", base_url="https://api.example/v1", api_key=KEY, transport=transport,
                                        retry_policy=RetryPolicy.never()))
    (error,) = recorder.errors
    assert isinstance(error, StreamInterruptedError), repr(error)
    assert type(failure).__name__ in str(error)
    _assert_detached(error)
    assert fake.requests == 1
