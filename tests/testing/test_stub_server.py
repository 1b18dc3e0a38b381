"""The loopback SSE stub server, driven by real clients (``http.client`` and raw sockets)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Callable

import pytest

from rxllm import ConfigurationError, ProtocolError
from rxllm.testing import (
    ConnectionRecord,
    Delay,
    Disconnect,
    Hold,
    RecordedRequest,
    StubResponse,
    StubServer,
)

CLIENT_TIMEOUT = 5.0
"""Client sockets time out so a broken server fails the test instead of hanging it."""
SEEN_WITHIN = 0.2
"""The server must observe a client close this promptly (what the lead's dispose tests assert)."""


def _address(server: StubServer) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def _http(server: StubServer) -> http.client.HTTPConnection:
    host, port = _address(server)
    return http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT)


def _raw(server: StubServer) -> socket.socket:
    return socket.create_connection(_address(server), timeout=CLIENT_TIMEOUT)


def _request_bytes(path: str = "/v1/stream", body: bytes = b"{}", extra: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: stub\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def _recv_until(sock: socket.socket, done: Callable[[bytes], bool]) -> bytes:
    data = b""
    while not done(data):
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    return data


def _read_to_end(sock: socket.socket) -> tuple[bytes, BaseException | None]:
    """Read until EOF or an error; return the bytes and the error (``None`` on a clean EOF)."""
    data = b""
    try:
        while piece := sock.recv(65536):
            data += piece
    except OSError as exc:
        return data, exc
    return data, None


def _assert_seen_promptly(record: ConnectionRecord, closed_at_client: float) -> None:
    assert record.wait_closed_by_client(CLIENT_TIMEOUT), "the server never saw the client close"
    assert record.closed_at is not None
    assert closed_at_client <= record.closed_at < closed_at_client + SEEN_WITHIN


# -- streaming ------------------------------------------------------------------------------


def test_events_arrive_incrementally_while_the_server_holds_the_rest(stub_server: StubServer) -> None:
    release = threading.Event()
    stub_server.enqueue(StubResponse(body=[b"data: one\n\n", Hold(release), b"data: two\n\n"]))
    client = _http(stub_server)
    client.request("POST", "/v1/stream", body=b"{}")
    response = client.getresponse()
    assert response.status == 200
    assert response.getheader("content-type") == "text/event-stream"
    assert response.getheader("transfer-encoding") == "chunked"
    # Would time out (CLIENT_TIMEOUT < Hold's 30 s) if the server buffered the body.
    assert response.read1(65536) == b"data: one\n\n"
    assert not release.is_set()
    release.set()
    assert response.read() == b"data: two\n\n"
    client.close()


def test_delay_pauses_between_events(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(body=[b"a", Delay(0.1), b"b"]))
    client = _http(stub_server)
    client.request("GET", "/")
    response = client.getresponse()
    assert response.read1(65536) == b"a"
    first = time.monotonic()
    assert response.read1(65536) == b"b"
    assert time.monotonic() - first >= 0.09
    assert response.read() == b""
    client.close()


def test_hold_timeout_lets_the_response_continue(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(body=[b"a", Hold(threading.Event(), timeout=0.05), b"b"]))
    client = _http(stub_server)
    client.request("GET", "/")
    assert client.getresponse().read() == b"ab"
    client.close()


def test_many_small_events_stream_intact(stub_server: StubServer) -> None:
    events = [json.dumps({"i": i, "text": "tok"}) for i in range(5000)]
    stub_server.enqueue(StubResponse.sse([*events, "[DONE]"]))
    client = _http(stub_server)
    client.request("POST", "/v1/stream", body=b"{}")
    body = client.getresponse().read()
    assert body == b"".join(b"data: " + e.encode() + b"\n\n" for e in [*events, "[DONE]"])
    client.close()


# -- faults ---------------------------------------------------------------------------------


def test_disconnect_with_reset_is_seen_as_a_reset_mid_body(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(body=[b"data: one\n\n", Disconnect(reset=True), b"data: never\n\n"]))
    with _raw(stub_server) as sock:
        sock.sendall(_request_bytes())
        data, error = _read_to_end(sock)
    assert isinstance(error, ConnectionResetError)
    assert b"never" not in data
    assert not data.endswith(b"0\r\n\r\n")
    record = stub_server.wait_for_connection(1, CLIENT_TIMEOUT)
    assert record is not None
    assert record.closed_at is None  # the server closed first


def test_disconnect_without_reset_is_a_clean_eof_mid_body(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(body=[b"data: one\n\n", Disconnect(reset=False), b"data: never\n\n"]))
    with _raw(stub_server) as sock:
        sock.sendall(_request_bytes())
        data, error = _read_to_end(sock)
    assert error is None
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert data.endswith(b"\r\n\r\nb\r\ndata: one\n\n\r\n")  # the first chunk, and no terminating chunk
    assert b"never" not in data


def test_disconnect_before_headers_sends_nothing(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(before_headers=[Disconnect(reset=False)]))
    with _raw(stub_server) as sock:
        sock.sendall(_request_bytes())
        assert _read_to_end(sock) == (b"", None)


# -- the client's close is observed promptly in every phase -------------------------------------


def test_client_close_mid_hold_is_observed_promptly(stub_server: StubServer) -> None:
    release = threading.Event()
    stub_server.enqueue(StubResponse(body=[b"data: one\n\n", Hold(release), b"data: two\n\n"]))
    client = _http(stub_server)
    client.request("POST", "/v1/stream", body=b"{}")
    response = client.getresponse()
    assert response.read1(65536) == b"data: one\n\n"
    record = stub_server.wait_for_connection(1, CLIENT_TIMEOUT)
    assert record is not None
    assert not record.closed_by_client.is_set()
    closed_at_client = time.monotonic()
    response.close()
    client.close()
    _assert_seen_promptly(record, closed_at_client)


def test_client_close_mid_delay_is_observed_promptly(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(body=[b"data: one\n\n", Delay(30), b"data: two\n\n"]))
    sock = _raw(stub_server)
    sock.sendall(_request_bytes())
    assert _recv_until(sock, lambda data: b"data: one" in data)
    record = stub_server.wait_for_connection(1, CLIENT_TIMEOUT)
    assert record is not None
    closed_at_client = time.monotonic()
    sock.close()
    _assert_seen_promptly(record, closed_at_client)


def test_client_close_while_waiting_for_headers_is_observed_promptly(stub_server: StubServer) -> None:
    release = threading.Event()
    stub_server.enqueue(StubResponse(before_headers=[Hold(release)], body=[b"data: late\n\n"]))
    sock = _raw(stub_server)
    sock.sendall(_request_bytes())
    assert stub_server.wait_for_requests(1, CLIENT_TIMEOUT)
    record = stub_server.connections[0]
    closed_at_client = time.monotonic()
    sock.close()
    _assert_seen_promptly(record, closed_at_client)


def test_client_close_while_idle_between_requests_is_observed_promptly(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse.json(200, {"ok": True}))
    client = _http(stub_server)
    client.request("POST", "/v1/chat", body=b"{}")
    assert json.loads(client.getresponse().read()) == {"ok": True}
    record = stub_server.connections[0]
    assert not record.closed_by_client.is_set()  # keep-alive: still open
    closed_at_client = time.monotonic()
    client.close()
    _assert_seen_promptly(record, closed_at_client)


def test_client_close_during_a_blocked_write_is_observed_promptly(stub_server: StubServer) -> None:
    big = b"x" * (1 << 20)
    stub_server.enqueue(StubResponse(body=[big] * 64))  # far more than the socket buffers hold
    sock = _raw(stub_server)
    sock.sendall(_request_bytes())
    assert _recv_until(sock, lambda data: len(data) > 1000)  # the client then stops reading
    record = stub_server.connections[0]
    closed_at_client = time.monotonic()
    sock.close()
    _assert_seen_promptly(record, closed_at_client)


def test_pipelined_request_during_a_hold_is_not_mistaken_for_a_close(stub_server: StubServer) -> None:
    release = threading.Event()
    stub_server.enqueue(
        StubResponse(body=[b"data: one\n\n", Hold(release), b"data: two\n\n"]),
        StubResponse.sse(["three"]),
    )
    with _raw(stub_server) as sock:
        sock.sendall(_request_bytes(path="/first"))
        assert _recv_until(sock, lambda data: b"data: one" in data)
        sock.sendall(_request_bytes(path="/second"))
        assert stub_server.wait_for_requests(1, CLIENT_TIMEOUT)
        release.set()
        data = _recv_until(sock, lambda data: data.count(b"0\r\n\r\n") == 2)
        assert b"data: two" in data
        assert b"data: three" in data
        assert [r.path for r in stub_server.requests] == ["/first", "/second"]
        assert not stub_server.connections[0].closed_by_client.is_set()


# -- HTTP/1.1 ---------------------------------------------------------------------------------


def test_keep_alive_requests_share_one_connection(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse.sse(["a"]), StubResponse.json(200, {"b": 2}))
    client = _http(stub_server)
    client.request("POST", "/one", body=b"1")
    assert client.getresponse().read() == b"data: a\n\n"
    client.request("POST", "/two", body=b"2")
    assert json.loads(client.getresponse().read()) == {"b": 2}
    client.close()
    first, second = stub_server.requests
    assert first.connection_id == second.connection_id == 1
    assert len(stub_server.connections) == 1
    assert stub_server.connections[0].requests == [first, second]


def test_requests_are_recorded(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse.sse(["ok"]))
    client = _http(stub_server)
    payload = {"model": "m", "stream": True}
    client.request("POST", "/v1/chat?x=1", body=json.dumps(payload).encode(), headers={"X-Custom-Header": "Value"})
    client.getresponse().read()
    client.close()
    (request,) = stub_server.requests
    assert isinstance(request, RecordedRequest)
    assert (request.method, request.path) == ("POST", "/v1/chat?x=1")
    assert request.headers["x-custom-header"] == "Value"
    assert all(name == name.lower() for name in request.headers)
    assert request.body == json.dumps(payload).encode()
    assert request.json() == payload
    assert request.connection_id == 1


def test_request_json_on_a_non_json_body_raises_protocol_error() -> None:
    request = RecordedRequest(method="POST", path="/", headers={}, body=b"not json", connection_id=1)
    with pytest.raises(ProtocolError):
        request.json()


def test_chunked_request_body_is_decoded(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse.json(200, {}))
    with _raw(stub_server) as sock:
        sock.sendall(
            b"POST /up HTTP/1.1\r\nHost: stub\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: t\r\n\r\n"
        )
        assert _recv_until(sock, lambda data: data.endswith(b"{}")).startswith(b"HTTP/1.1 200 OK\r\n")
    assert stub_server.requests[0].body == b"hello world"


def test_expect_100_continue_is_answered(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse.json(200, {}))
    with _raw(stub_server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: stub\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert _recv_until(sock, lambda data: b"\r\n\r\n" in data) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"{}")
        assert _recv_until(sock, lambda data: data.endswith(b"{}")).startswith(b"HTTP/1.1 200 OK\r\n")
    assert stub_server.requests[0].body == b"{}"


def test_a_malformed_request_gets_400_and_the_connection_closes(stub_server: StubServer) -> None:
    with _raw(stub_server) as sock:
        sock.sendall(b"garbage\r\n\r\n")
        data, error = _read_to_end(sock)
    assert error is None
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert stub_server.requests == []


def test_non_chunked_body_has_content_length_and_keeps_alive(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(body=[b"ab", b"cd"], chunked=False), StubResponse.json(201, [1]))
    client = _http(stub_server)
    client.request("GET", "/")
    response = client.getresponse()
    assert response.getheader("content-length") == "4"
    assert response.getheader("transfer-encoding") is None
    assert response.read() == b"abcd"
    client.request("GET", "/")
    response = client.getresponse()
    assert (response.status, response.read()) == (201, b"[1]")
    client.close()
    assert {r.connection_id for r in stub_server.requests} == {1}


def test_non_chunked_body_with_pauses_is_close_delimited(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse(body=[b"ab", Delay(0.01), b"cd"], chunked=False))
    with _raw(stub_server) as sock:
        sock.sendall(_request_bytes())
        data, error = _read_to_end(sock)
    assert error is None
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"connection: close" in head
    assert b"content-length" not in head
    assert b"transfer-encoding" not in head
    assert body == b"abcd"
    assert stub_server.connections[0].closed_at is None  # the server closed first


def test_head_request_gets_headers_only(stub_server: StubServer) -> None:
    stub_server.enqueue(StubResponse.json(200, {"a": 1}), StubResponse.json(200, {"b": 2}))
    client = _http(stub_server)
    client.request("HEAD", "/")
    response = client.getresponse()
    assert response.getheader("content-length") == "8"
    assert response.read() == b""
    client.request("GET", "/")
    assert client.getresponse().read() == b'{"b": 2}'
    client.close()


# -- choosing the response ----------------------------------------------------------------------


def test_empty_queue_without_responder_answers_500_json(stub_server: StubServer) -> None:
    client = _http(stub_server)
    client.request("POST", "/v1/chat", body=b"{}")
    response = client.getresponse()
    assert response.status == 500
    assert response.getheader("content-type") == "application/json"
    assert "no response was scripted" in json.loads(response.read())["error"]["message"]
    client.close()
    assert len(stub_server.requests) == 1


def test_responses_are_served_fifo_then_the_responder_answers() -> None:
    def responder(request: RecordedRequest) -> StubResponse:
        return StubResponse.sse([f"echo {request.path}"])

    with StubServer([StubResponse.sse(["scripted"])], responder=responder) as server:
        client = _http(server)
        bodies = []
        for path in ("/a", "/b", "/c"):
            client.request("GET", path)
            bodies.append(client.getresponse().read())
        client.close()
    assert bodies == [b"data: scripted\n\n", b"data: echo /b\n\n", b"data: echo /c\n\n"]


def test_a_failing_responder_answers_500_json() -> None:
    def responder(request: RecordedRequest) -> StubResponse:
        raise RuntimeError("boom")

    with StubServer(responder=responder) as server:
        client = _http(server)
        client.request("GET", "/")
        response = client.getresponse()
        assert response.status == 500
        assert "RuntimeError: boom" in json.loads(response.read())["error"]["message"]
        client.close()


def test_wait_for_connection_returns_the_nth_record_or_none(stub_server: StubServer) -> None:
    assert stub_server.url.startswith("http://127.0.0.1:")
    assert stub_server.wait_for_connection(1, 0.01) is None
    with _raw(stub_server):
        record = stub_server.wait_for_connection(1, CLIENT_TIMEOUT)
        assert record is not None
        assert record.id == 1
        assert record.opened_at <= time.monotonic()
        assert record.closed_at is None


# -- close() ----------------------------------------------------------------------------------


def _open_fds() -> int | None:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def test_close_releases_holds_and_leaves_no_threads_or_sockets() -> None:
    threads_before = threading.active_count()
    fds_before = _open_fds()
    release = threading.Event()
    server = StubServer(responder=lambda request: StubResponse(body=[b"data: one\n\n", Hold(release)]))
    server.start()
    held = []
    for _ in range(3):
        sock = _raw(server)
        sock.sendall(_request_bytes())
        assert _recv_until(sock, lambda data: b"data: one" in data)
        held.append(sock)
    waiting = StubResponse(before_headers=[Hold(release)])
    server.enqueue(waiting)
    header_wait = _raw(server)
    header_wait.sendall(_request_bytes())
    idle = _raw(server)  # connected, no request yet
    assert server.wait_for_requests(4, CLIENT_TIMEOUT)
    assert server.wait_for_connection(5, CLIENT_TIMEOUT) is not None
    assert threading.active_count() == threads_before + 1 + 5  # the accept thread, one per connection

    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 2.0  # well under the holds' 30 s
    assert threading.active_count() == threads_before
    assert not release.is_set()  # ended without touching the caller's event
    for sock in [*held, header_wait, idle]:
        data, error = _read_to_end(sock)  # the server's end is gone: EOF (or a reset)
        assert error is None or isinstance(error, ConnectionResetError)
        assert not data.endswith(b"0\r\n\r\n")
        sock.close()
    assert all(record.closed_at is None for record in server.connections)  # the server closed first
    if fds_before is not None:
        assert _open_fds() == fds_before
    server.close()  # idempotent
    with pytest.raises(ConfigurationError):
        server.start()


# -- building responses -----------------------------------------------------------------------


def test_sse_factory_formats_events() -> None:
    response = StubResponse.sse(["a", "line1\nline2", b"event: ping\n\n"], delay=0.5, headers={"X-Id": "7"})
    assert response.body == (
        b"data: a\n\n",
        Delay(0.5),
        b"data: line1\ndata: line2\n\n",
        Delay(0.5),
        b"event: ping\n\n",
    )
    assert dict(response.headers) == {"content-type": "text/event-stream", "X-Id": "7"}
    assert response.chunked
    assert StubResponse.sse([], headers={"Content-Type": "text/plain"}).headers == {"Content-Type": "text/plain"}


def test_raw_factory_cuts_at_offsets(stub_server: StubServer) -> None:
    data = b"data: one\n\ndata: two\n\n"
    response = StubResponse.raw(data, split_at=[0, 3, 3, 15])
    assert response.body == (b"dat", b"a: one\n\ndata", b": two\n\n")
    assert StubResponse.raw(data, split_at=[3], delay=0.01).body == (b"dat", Delay(0.01), data[3:])
    stub_server.enqueue(response)
    client = _http(stub_server)
    client.request("GET", "/")
    assert client.getresponse().read() == data
    client.close()


def test_json_factory() -> None:
    response = StubResponse.json(429, {"error": "slow down"}, headers={"retry-after": "2"})
    assert response.status == 429
    assert response.body == (b'{"error": "slow down"}',)
    assert not response.chunked
    assert dict(response.headers) == {"content-type": "application/json", "retry-after": "2"}


@pytest.mark.parametrize(
    "build",
    [
        lambda: Delay(-1),
        lambda: Delay(float("nan")),
        lambda: Hold(threading.Event(), timeout=0),
        lambda: StubResponse(status=42),
        lambda: StubResponse(headers={"Content-Length": "3"}),
        lambda: StubResponse(headers={"x-bad": "a\r\nb"}),
        lambda: StubResponse(body=["text is not bytes"]),  # type: ignore[list-item]
        lambda: StubResponse(before_headers=[b"bytes"]),  # type: ignore[list-item]
        lambda: StubResponse.raw(b"abc", split_at=[2, 1]),
        lambda: StubResponse.raw(b"abc", split_at=[4]),
        lambda: StubServer([object()]),  # type: ignore[list-item]
    ],
)
def test_bad_arguments_raise_configuration_error(build: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError):
        build()
