"""Credentials stay with their origin, and never reach an error, on both transports.

* a user's client that follows redirects: a redirect to another origin arrives there without any
  credential rxllm set (every provider's header name, and a key in the URL's query); a redirect from
  https to plain http is refused; a redirect loop ends after the client's ``max_redirects``, not
  retried; rxllm's own clients follow no redirect at all;
* a credential over plain http goes only to a loopback peer: through a forward proxy on a
  non-loopback address of this machine it is refused before a byte is written (the proxy sees
  nothing), through one on ``[::ffff:127.0.0.1]`` (loopback, IPv4-mapped) it goes;
* a header value no HTTP header can carry (a key with its trailing newline, a typographic quote)
  fails with a :class:`ConfigurationError` that does not quote it, before anything is sent;
* the HTTP library's error an rxllm error is chained to holds no request (so no header object).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, LoopbackRelay, Recorder, read_request, relay
from wire import OPENAI

from rxllm import AsyncHttpTransport, ConfigurationError, RetryPolicy, SseChatModel, TransportError
from rxllm._core.redact import secure_destination
from rxllm._transports.clients import transport_for_client
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer

KEY = "sk-test-0123456789abcdef"


def _run(model: SseChatModel) -> Recorder:
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait("a call")
    return recorder


@contextlib.contextmanager
def _user_client(kind: str, library: Any = httpx2, **options: Any) -> Iterator[Any]:
    client = library.Client(**options) if kind == "threads" else library.AsyncClient(**options)
    transport = transport_for_client(client)
    try:
        yield transport
    finally:
        if kind == "asyncio":
            assert isinstance(transport, AsyncHttpTransport)
            asyncio.run_coroutine_threadsafe(client.aclose(), transport.loop).result(TIMEOUT)
        else:
            client.close()
        transport.close()


def _redirect(location: str, status: int = 307) -> StubResponse:
    return StubResponse(status=status, headers={"Location": location}, body=[], chunked=False)


PROVIDERS = {
    "openai": (lambda url, t: OpenAiChatModel("m", base_url=f"{url}/v1", api_key=KEY, transport=t,
                                                  retry_policy=RetryPolicy.never()), "authorization"),
    "anthropic": (lambda url, t: AnthropicModel("m", base_url=url, api_key=KEY, transport=t,
                                                     retry_policy=RetryPolicy.never()), "x-api-key"),
    "gemini": (lambda url, t: GeminiModel("m", base_url=url, api_key=KEY, transport=t,
                                               retry_policy=RetryPolicy.never()), "x-goog-api-key"),
}


@pytest.mark.parametrize("library", [httpx2, httpx], ids=["httpx2", "httpx"])
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_cross_origin_redirect_arrives_without_any_credential(kind: str, provider: str, library: Any) -> None:
    make, header = PROVIDERS[provider]
    wire_protocol = {"openai": "openai-chat", "anthropic": "anthropic", "gemini": "gemini"}[provider]
    from rxllm.testing import sse_turn

    with StubServer([StubResponse(body=sse_turn(wire_protocol, text=["moved"], usage=(1, 1)))]) as target, \
            StubServer([]) as origin:
        origin.enqueue(_redirect(f"{target.url}/elsewhere?key={KEY}&keep=1"))
        with _user_client(kind, library, follow_redirects=True) as transport:
            recorder = _run(make(origin.url, transport))
        assert recorder.errors == [] and recorder.items[-1].text() == "moved"
        (arrived,) = target.requests
        assert header in {name.lower() for name in origin.requests[0].headers}, "the origin got its credential"
    sent = {name.lower(): value for name, value in arrived.headers.items()}
    assert not any(KEY in value for value in sent.values()), f"a credential followed the redirect: {sent}"
    assert KEY not in arrived.path and "keep=1" in arrived.path


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_redirect_from_https_to_plain_http_is_refused(kind: str) -> None:
    trustme = pytest.importorskip("trustme")
    import ssl

    from faults_support import TlsFront

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    with StubServer([OPENAI.response("leaked")]) as plain, StubServer([]) as origin:
        origin.enqueue(_redirect(f"{plain.url}/v1/chat/completions"))
        front = TlsFront(server_context, ("127.0.0.1", int(origin.url.rsplit(":", 1)[1])))
        try:
            with _user_client(kind, follow_redirects=True, verify=client_context) as transport:
                recorder = _run(OpenAiChatModel("m", base_url=f"{front.url}/v1", api_key=KEY, transport=transport))
        finally:
            front.close()
        assert plain.requests == [], "the downgraded request was sent"
    (error,) = recorder.errors
    assert isinstance(error, TransportError) and not error.retryable and "plain http" in str(error)
    assert len(origin.requests) == 1, "a refused redirect was retried"


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_redirect_loop_ends_at_max_redirects_and_is_not_retried(kind: str) -> None:
    with StubServer([]) as origin:
        for _ in range(6):
            origin.enqueue(_redirect(f"{origin.url}/v1/chat/completions", status=302))
        with _user_client(kind, follow_redirects=True, max_redirects=3) as transport:
            recorder = _run(OpenAiChatModel("m", base_url=f"{origin.url}/v1", api_key=KEY, transport=transport))
        requests = len(origin.requests)
    (error,) = recorder.errors
    assert isinstance(error, TransportError) and not error.retryable and "redirects" in str(error)
    assert requests == 4  # the request and its 3 allowed hops, once: no retry


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_rxllms_own_clients_follow_no_redirect(kind: str) -> None:
    from faults_support import make_transport

    with StubServer([OPENAI.response("elsewhere")]) as target, StubServer([]) as origin:
        origin.enqueue(_redirect(f"{target.url}/v1/chat/completions"))
        transport = make_transport(kind)
        try:
            recorder = _run(OpenAiChatModel("m", base_url=f"{origin.url}/v1", api_key=KEY, transport=transport,
                                            retry_policy=RetryPolicy.never()))
        finally:
            transport.close()
        assert target.requests == []
    assert len(recorder.errors) == 1 and "307" in str(recorder.errors[0])


# --- plain-http proxies -----------------------------------------------------------------------------


def _own_address() -> str | None:
    """A non-loopback IPv4 address of this machine (a proxy there is not on loopback)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        address = str(probe.getsockname()[0])
        if not address.startswith("127."):
            return address
    return None


class ForwardProxy(LoopbackRelay):
    """A forward proxy listening on ``address`` (any address of this machine, ``family`` its kind),
    reached at ``url_host``; records the request heads it received."""

    def __init__(self, address: str, family: int, url_host: str) -> None:
        self.received: list[bytes] = []
        self._listener = socket.create_server((address, 0), family=family,
                                              dualstack_ipv6=family == socket.AF_INET6)
        self.url = f"http://{url_host}:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, name="forward-proxy", daemon=True)
        self._thread.start()

    def _handle(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(65536)
            if not data:
                self.received.append(head)
                client.close()
                return
            head += data
        self.received.append(head)
        line, rest = head.split(b"\r\n", 1)
        method, target, version = line.split(b" ", 2)
        url = httpx.URL(target.decode())
        upstream = socket.create_connection((url.host, url.port or 80))
        upstream.sendall(b" ".join([method, url.raw_path, version]) + b"\r\n" + rest)
        relay(client, upstream)


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_key_never_goes_in_clear_to_a_proxy_off_loopback(kind: str) -> None:
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    proxy = ForwardProxy(address, socket.AF_INET, address)
    try:
        with StubServer([OPENAI.response("via proxy")]) as server:
            with _user_client(kind, proxy=proxy.url) as transport:
                recorder = _run(OpenAiChatModel("m", base_url=f"{server.url}/v1", api_key=KEY, transport=transport,
                                                retry_policy=RetryPolicy.never()))
            assert server.requests == []
    finally:
        proxy.close()
    (error,) = recorder.errors
    assert isinstance(error, ConfigurationError) and "proxy" in str(error) and KEY not in str(error)
    assert not any(KEY.encode() in head for head in proxy.received), "the key reached the proxy"


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_proxy_on_ipv4_mapped_loopback_counts_as_loopback(kind: str) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        proxy = ForwardProxy("::", socket.AF_INET6, "[::ffff:127.0.0.1]")
    except OSError:
        pytest.skip("no dual-stack IPv6 listener")
    try:
        with StubServer([OPENAI.response("via proxy")]) as server, _user_client(kind, proxy=proxy.url) as transport:
            recorder = _run(OpenAiChatModel("m", base_url=f"{server.url}/v1", api_key=KEY, transport=transport,
                                            retry_policy=RetryPolicy.never()))
    finally:
        proxy.close()
    assert recorder.errors == [] and recorder.items[-1].text() == "via proxy"
    assert len(proxy.received) == 1


@pytest.mark.parametrize(
    ("url", "secure"),
    [("http://127.0.0.1:1/", True), ("http://[::1]/", True), ("http://[::ffff:127.0.0.1]/", True),
     ("http://[::ffff:7f00:1]/", True), ("http://localhost./", True), ("http://API.LOCALHOST/", True),
     ("http://127.1/", False), ("http://[::ffff:10.0.0.1]/", False), ("http://10.0.0.1/", False),
     ("https://10.0.0.1/", True), ("http://localhost.example.com/", False)],
)
def test_one_rule_decides_where_a_key_may_go_in_clear(url: str, secure: bool) -> None:
    assert secure_destination(url) is secure
    if secure:
        OpenAiChatModel("m", base_url=url, api_key=KEY)
    else:
        with pytest.raises(ConfigurationError):
            OpenAiChatModel("m", base_url=url, api_key=KEY)


# --- secrets in errors ------------------------------------------------------------------------------


def _raw_transport(kind: str) -> Any:
    from faults_support import make_transport

    return make_transport(kind)


@pytest.mark.parametrize("value", ["Bearer sk-secret-value-123\n", "Bearer sk-secret\u201dvalue-123"],
                         ids=["trailing-newline", "typographic-quote"])
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_an_illegal_header_value_fails_without_quoting_it(kind: str, value: str) -> None:
    from rxllm._transports.base import HttpRequest

    class Mapper:
        provider = "custom"

        def to_http_request(self, request: Any, *, model: str, stream: bool) -> HttpRequest:
            return HttpRequest(url=f"{server.url}/v1", body=b"{}", headers={"Authorization": value})

    with StubServer([OPENAI.response("never")]) as server:
        transport = _raw_transport(kind)
        try:
            from rxllm.providers._openai_chat import OpenAiChatChunkParser

            model = SseChatModel("m", mapper=Mapper(), parser=OpenAiChatChunkParser, transport=transport)  # type: ignore[arg-type]
            recorder = _run(model)
        finally:
            transport.close()
        assert server.requests == []
    (error,) = recorder.errors
    assert isinstance(error, ConfigurationError) and "'Authorization' header" in str(error)
    assert "sk-secret" not in str(error) and "sk-secret" not in repr(error)
    assert len(server.requests) == 0


class _Refuser(LoopbackRelay):
    """Accepts and reads the request, then resets the connection (a ReadError / RemoteProtocolError)."""

    def _handle(self, client: socket.socket) -> None:
        read_request(client)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        client.close()


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_the_chained_library_error_holds_no_request(kind: str) -> None:
    server = _Refuser("http", "refuser")
    transport = _raw_transport(kind)
    try:
        recorder = _run(OpenAiChatModel("m", base_url=f"{server.url}/v1", api_key=KEY, transport=transport,
                                        retry_policy=RetryPolicy.never()))
    finally:
        transport.close()
        server.close()
    (error,) = recorder.errors
    assert isinstance(error, TransportError)
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    assert len(chain) >= 2, "the library's error is no longer chained (keep the cause, sanitised)"
    for link in chain[1:]:
        assert link.__traceback__ is None
        with pytest.raises(RuntimeError):  # httpx's "The .request property has not been set."
            _ = link.request  # type: ignore[attr-defined]
        assert KEY not in str(link) and KEY not in repr(link)
