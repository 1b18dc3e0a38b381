"""Failures a retry cannot mend are not retried, on both transports (the server counts the requests).

* an HTTP 200 carrying a web page where an event stream was expected (a wrong ``base_url``) fails
  with "expected text/event-stream, got text/html from URL", once;
* a certificate that does not verify fails once (the TLS front counts the connection attempts);
* response headers too large for the HTTP library fail once.
"""

from __future__ import annotations

import ssl

import pytest
from faults_support import REQUEST, TRANSPORT_KINDS, Recorder, TlsFront, make_transport
from wire import OPENAI

from rxllm import ProtocolError, RetryPolicy, TransportError
from rxllm.testing import StubResponse, StubServer

RETRIES = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.001)


def _run(model: object) -> Recorder:
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))  # type: ignore[attr-defined]
    recorder.wait("a call")
    return recorder


def _call_thrice_offered(kind: str, response: StubResponse) -> tuple[Recorder, int, str]:
    """One call (retries allowed) to a server that would give ``response`` three times: what the
    caller got, how many requests the server received, and the server's URL."""
    with StubServer([response, response, response]) as server:
        transport = make_transport(kind)
        try:
            recorder = _run(OPENAI.model(server.url, transport=transport, retry_policy=RETRIES))
        finally:
            transport.close()
        return recorder, len(server.requests), server.url


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_web_page_instead_of_an_event_stream_says_so_and_is_not_retried(kind: str) -> None:
    page = StubResponse(headers={"Content-Type": "text/html; charset=utf-8"}, body=[b"<html>login</html>"])
    recorder, requests, url = _call_thrice_offered(kind, page)
    (error,) = recorder.errors
    assert isinstance(error, ProtocolError) and not error.retryable
    assert f"expected text/event-stream, got text/html from {url}/v1/chat/completions" in str(error)
    assert requests == 1


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_certificate_that_does_not_verify_is_not_retried(kind: str) -> None:
    trustme = pytest.importorskip("trustme")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    trustme.CA().issue_cert("127.0.0.1").configure_cert(server_context)  # a CA the client does not trust
    with StubServer([OPENAI.response("never")] * 3) as server:
        front = TlsFront(server_context, ("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
        attempts: list[int] = []
        original = front._handle

        def counting(raw: object) -> None:
            attempts.append(1)
            original(raw)  # type: ignore[arg-type]

        front._handle = counting  # type: ignore[method-assign]
        transport = make_transport(kind)
        try:
            recorder = _run(OPENAI.model(front.url, transport=transport, retry_policy=RETRIES))
        finally:
            transport.close()
            front.close()
    (error,) = recorder.errors
    assert isinstance(error, TransportError) and not error.retryable, error
    assert len(attempts) == 1 and front.handshakes == 0


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_response_headers_too_large_are_not_retried(kind: str) -> None:
    # past h11's 100 KiB cap on a response head: a retry would get the same head again
    huge = StubResponse(headers={"Content-Type": "text/event-stream", "X-Padding": "a" * 200_000},
                        body=OPENAI.stream("never"))
    recorder, requests, _ = _call_thrice_offered(kind, huge)
    (error,) = recorder.errors
    assert isinstance(error, TransportError) and not error.retryable, error
    assert requests == 1
