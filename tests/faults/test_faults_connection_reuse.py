"""Connections are reused, never after a cancel, on both transports.

A stream that ended (the provider's end marker, or the body's end) reads the bytes that end the
body before it completes, so its connection goes back to the pool and the next call, made when the
first completes, finds it there: 20 sequential calls are one connection, as the server counts them,
also over TLS (one handshake). A stream disposed mid-body, or after its final while the body's last
bytes are still being read, closes its connection: the next call opens a new one.
"""

from __future__ import annotations

import asyncio
import ssl
import threading

import httpx
import pytest
import reactivex
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder, TlsFront, make_transport
from reactivex import operators as ops
from wire import OPENAI, WIRES, Wire

from rxllm import AsyncHttpTransport, LlmResponse, RetryPolicy, SseChatModel
from rxllm._transports.clients import transport_for_client
from rxllm.testing import Hold, StubResponse, StubServer

trustme = pytest.importorskip("trustme")
CALLS = 20


def _call(model: SseChatModel) -> str:
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait("a sequential call")
    assert recorder.errors == [] and recorder.completed
    final: LlmResponse = recorder.items[-1]
    assert not final.partial
    return final.text()


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_twenty_sequential_streams_use_one_connection(kind: str, wire: Wire) -> None:
    with StubServer([wire.response(f"answer {i}") for i in range(CALLS)]) as server:
        transport = make_transport(kind)
        try:
            model = wire.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            texts = [_call(model) for _ in range(CALLS)]
        finally:
            transport.close()
        connections = server.connections
    assert texts == [f"answer {i}" for i in range(CALLS)]
    assert len(connections) == 1, f"{len(connections)} connections for {CALLS} sequential calls"
    assert len(connections[0].requests) == CALLS


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_twenty_sequential_streams_over_tls_pay_one_handshake(kind: str) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    client = httpx.Client(verify=client_context) if kind == "threads" else httpx.AsyncClient(verify=client_context)
    transport = transport_for_client(client)
    with StubServer([OPENAI.response(f"tls {i}") for i in range(CALLS)]) as server:
        front = TlsFront(server_context, ("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
        try:
            model = OPENAI.model(front.url, transport=transport, retry_policy=RetryPolicy.never())
            texts = [_call(model) for _ in range(CALLS)]
        finally:
            if isinstance(client, httpx.AsyncClient):  # rxllm never closes a client you built: the test does
                assert isinstance(transport, AsyncHttpTransport)
                asyncio.run_coroutine_threadsafe(client.aclose(), transport.loop).result(TIMEOUT)
            else:
                client.close()
            transport.close()
            front.close()
        connections = server.connections
    assert texts == [f"tls {i}" for i in range(CALLS)]
    assert front.handshakes == 1 and len(connections) == 1


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_stream_disposed_mid_body_never_lends_its_connection(kind: str) -> None:
    release = threading.Event()
    stream = OPENAI.stream("Hello", " world", "!")
    cut = len(OPENAI.prelude()) + 2
    with StubServer([StubResponse(body=[*stream[:cut], Hold(release), *stream[cut:]]),
                     OPENAI.response("next")]) as server:
        transport = make_transport(kind)
        try:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            recorder = Recorder(notify_after=1)
            subscription = recorder.subscribe(model.generate_content(REQUEST, stream=True))
            assert recorder.reached.wait(TIMEOUT), "the first partial did not arrive"
            subscription.dispose()
            first = server.connections[0]
            assert first.wait_closed_by_client(TIMEOUT), "the disposed stream's connection stayed open"
            release.set()
            assert _call(model) == "next"
        finally:
            release.set()
            transport.close()
        connections = server.connections
    assert len(connections) == 2 and len(connections[0].requests) == 1 and len(connections[1].requests) == 1


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_stream_disposed_at_its_final_never_lends_its_connection(kind: str) -> None:
    """Disposed while the body's last bytes are still awaited (the server holds them back): closed."""
    release = threading.Event()
    with StubServer([StubResponse(body=[*OPENAI.stream("done"), Hold(release)]),
                     OPENAI.response("next")]) as server:
        transport = make_transport(kind)
        try:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            finals: reactivex.Observable[LlmResponse] = model.generate_content(REQUEST, stream=True).pipe(
                ops.first(lambda response: not response.partial)
            )
            recorder = Recorder()
            recorder.subscribe(finals)
            recorder.wait("the first final")
            assert [r.text() for r in recorder.items] == ["done"]
            assert server.connections[0].wait_closed_by_client(TIMEOUT), "the disposed stream's connection stayed open"
            assert _call(model) == "next"
        finally:
            release.set()
            transport.close()
        connections = server.connections
    assert len(connections) == 2 and len(connections[1].requests) == 1
