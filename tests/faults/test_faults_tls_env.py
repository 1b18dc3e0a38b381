"""``SSL_CERT_FILE`` is honoured as httpx honours it (``trust_env``), on both default transports:
against a loopback HTTPS server whose certificate a private CA signed, a call
completes when ``SSL_CERT_FILE`` names that CA's bundle, and fails with a :class:`TransportError`
that says the certificate did not verify when it does not. httpx reads the variable when a client's
SSL context is built, so it is set before the transport is built (``HttpTransport``) or used
(``AsyncHttpTransport`` builds its pools on first use)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from faults_support import REQUEST, TRANSPORT_KINDS, Recorder, TlsFront, make_transport
from wire import OPENAI

from rxllm import RetryPolicy, TransportError
from rxllm.testing import StubServer

trustme = pytest.importorskip("trustme")


@pytest.fixture
def ca_bundle(tmp_path: Path) -> Iterator[tuple[Path, ssl.SSLContext]]:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    yield bundle, server_context


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _stream_through_a_front(
    kind: str, server_context: ssl.SSLContext, server: StubServer, what: str
) -> tuple[Recorder, TlsFront]:
    """One streamed call on a fresh transport of ``kind`` to a TLS front of ``server``; both closed after."""
    front = TlsFront(server_context, ("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    transport = make_transport(kind)
    try:
        recorder = Recorder()
        model = OPENAI.model(front.url, transport=transport, retry_policy=RetryPolicy.never())
        recorder.subscribe(model.generate_content(REQUEST, stream=True))
        recorder.wait(what)
    finally:
        transport.close()
        front.close()
    return recorder, front


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_ssl_cert_file_lets_a_private_ca_verify_on_both_transports(
    kind: str, ca_bundle: tuple[Path, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, server_context = ca_bundle
    _clean_env(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    with StubServer([OPENAI.response("over", " TLS")]) as server:
        recorder, front = _stream_through_a_front(kind, server_context, server, "a streamed call over TLS")
    assert recorder.errors == []
    assert [(r.text(), r.partial) for r in recorder.items] == [("over", True), (" TLS", True), ("over TLS", None)]
    assert front.handshakes == 1 and len(server.requests) == 1


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_without_ssl_cert_file_the_private_ca_fails_verification(
    kind: str, ca_bundle: tuple[Path, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server_context = ca_bundle
    _clean_env(monkeypatch)
    with StubServer([OPENAI.response("never")]) as server:
        recorder, front = _stream_through_a_front(kind, server_context, server, "a call to an untrusted certificate")
    assert recorder.items == []
    (error,) = recorder.errors
    assert isinstance(error, TransportError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(error) or "certificate verify failed" in str(error)
    assert front.handshakes == 0 and server.requests == []


def test_a_client_you_built_with_verify_and_http2_streams_over_tls(
    ca_bundle: tuple[Path, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CA is trusted only through the client's own ``verify=`` (no SSL_CERT_FILE); ``http2=True``
    # needs h2 (the dev dependency group) and negotiates HTTP/1.1 here, as the loopback server offers no ALPN.
    pytest.importorskip("h2")
    bundle, server_context = ca_bundle
    _clean_env(monkeypatch)
    client = httpx.Client(verify=ssl.create_default_context(cafile=str(bundle)), http2=True)
    with StubServer([OPENAI.response("your", " client")]) as server:
        front = TlsFront(server_context, ("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
        model = OPENAI.model(front.url, http_client=client, retry_policy=RetryPolicy.never())
        try:
            recorder = Recorder()
            recorder.subscribe(model.generate_content(REQUEST, stream=True))
            recorder.wait("a streamed call over TLS on a client you built")
        finally:
            model._transport.close()  # type: ignore[union-attr]  # rxllm's side only: the client stays open
            assert not client.is_closed
            client.close()
            front.close()
    assert recorder.errors == []
    assert [(r.text(), r.partial) for r in recorder.items] == [("your", True), (" client", True), ("your client", None)]
    assert front.handshakes == 1 and len(server.requests) == 1
