"""What an open stream of the asyncio transport holds, and what it no longer holds.

The direct connect to an IP address (``asynchronous._connect_ip``):

httpcore2's default backend connects through ``anyio.connect_tcp``, whose machinery for host names
(a task group, a task per address, an event and a cancel scope each) is what thousands of streams
connecting at once hold at their peak. For an IP address the transport connects one socket with the
loop's ``sock_connect`` and hands it to anyio instead. Checked here against the anyio path it
replaces: the same stream class, socket options and bytes; the same errors with the same messages
(refused, timed out), through the backend and through a model; a cancelled connect closes its
socket; no task of its own while connecting; which connects take the direct path.

The sent request: an open stream of rxllm's own pool does not keep it (its headers, URL and body);
the stream goes on and fails as before. A client you passed keeps it on its responses.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore2
import httpx2
import pytest
from httpcore2._backends.anyio import AnyIOBackend
from httpcore2._backends.auto import AutoBackend
from wire import OPENAI

from rxllm import (
    AsyncHttpTransport,
    Content,
    LlmRequest,
    Part,
    RetryPolicy,
    StreamInterruptedError,
    TransportError,
)
from rxllm._transports import asynchronous
from rxllm._transports.asynchronous import _CancellableAsyncBackend, _connect_ip
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Disconnect, Hold, StubResponse, StubServer

REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("go")])])


async def _echo_server(host: str = "127.0.0.1") -> tuple[asyncio.Server, int, list[bytes]]:
    """A server echoing what it reads; ``seen`` gets ``b""`` when a client's connection ends."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        seen.append(b"")
        writer.close()

    server = await asyncio.start_server(handle, host, 0)
    return server, server.sockets[0].getsockname()[1], seen


def _closed_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _both(
    host: str, port: int, socket_options: Iterable[Any] | None = None
) -> AsyncIterator[tuple[str, httpcore2.AsyncNetworkStream]]:
    yield "anyio", await AnyIOBackend().connect_tcp(host, port, timeout=5, socket_options=socket_options)
    yield "direct", await _connect_ip(socket.AF_INET, host, port, 5, socket_options)


def test_a_direct_connect_is_the_anyio_backends_stream() -> None:
    async def main() -> dict[str, tuple[Any, ...]]:
        server, port, seen = await _echo_server()
        options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        found = {}
        async with server:
            async for name, stream in _both("127.0.0.1", port, options):
                sock = stream.get_extra_info("socket")
                readable_before = stream.get_extra_info("is_readable")
                await stream.write(b"ping", timeout=5)
                echoed = await stream.read(1024, timeout=5)
                found[name] = (
                    type(stream),
                    readable_before,
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    sock.getpeername(),
                    echoed,
                )
                await stream.aclose()
                while len(seen) < len(found):  # the server observes the close
                    await asyncio.sleep(0)
        return found

    found = asyncio.run(main())
    assert found["direct"] == found["anyio"]
    assert found["direct"][-1] == b"ping"
    assert found["direct"][3] == 1  # the socket option was applied


def test_a_refused_connect_fails_as_the_anyio_backend_does() -> None:
    port = _closed_port()

    async def main() -> list[tuple[type[BaseException], str]]:
        failures: list[tuple[type[BaseException], str]] = []
        for connect in (
            AnyIOBackend().connect_tcp("127.0.0.1", port, timeout=5),
            _connect_ip(socket.AF_INET, "127.0.0.1", port, 5, None),
        ):
            with pytest.raises(httpcore2.ConnectError) as raised:
                await connect
            failures.append((type(raised.value), str(raised.value)))
        return failures

    anyio_failure, direct_failure = asyncio.run(main())
    assert direct_failure == anyio_failure
    assert direct_failure[1] == "All connection attempts failed"


def test_a_refused_model_call_reads_the_same_by_address_and_by_name() -> None:
    """Through a model: 127.0.0.1 (the direct connect) and localhost (anyio's) fail with the same error."""
    port = _closed_port()

    async def call(host: str) -> TransportError:
        transport = AsyncHttpTransport(loop=asyncio.get_running_loop())
        model = OpenAiChatModel("m", base_url=f"http://{host}:{port}/v1", api_key="k", transport=transport,
                                retry_policy=RetryPolicy.never())
        try:
            with pytest.raises(TransportError) as raised:
                await model.generate_content(REQUEST, stream=True)
            return raised.value
        finally:
            await transport.aclose()

    async def main() -> tuple[TransportError, TransportError]:
        return await call("127.0.0.1"), await call("localhost")

    by_address, by_name = asyncio.run(main())
    assert str(by_address).replace("127.0.0.1", "localhost") == str(by_name)
    assert type(by_address) is type(by_name)
    assert by_address.retryable == by_name.retryable
    assert type(by_address.__cause__) is type(by_name.__cause__)


class _HangingConnects:
    """The loop's ``sock_connect`` replaced by one that never completes; records the sockets and the tasks then."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sockets: list[socket.socket] = []
        self.tasks_while_connecting: set[asyncio.Task[Any]] = set()
        self.connecting = asyncio.Event()
        self._loop = loop

    async def sock_connect(self, sock: socket.socket, address: Any) -> None:
        self.sockets.append(sock)
        self.tasks_while_connecting = asyncio.all_tasks(self._loop)
        self.connecting.set()
        await self._loop.create_future()


def test_a_connect_that_times_out_is_a_connect_timeout_and_closes_its_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> _HangingConnects:
        loop = asyncio.get_running_loop()
        hanging = _HangingConnects(loop)
        monkeypatch.setattr(loop, "sock_connect", hanging.sock_connect)
        with pytest.raises(httpcore2.ConnectTimeout):
            await _connect_ip(socket.AF_INET, "127.0.0.1", 9, 0.001, None)
        return hanging

    hanging = asyncio.run(main())
    assert [sock.fileno() for sock in hanging.sockets] == [-1]


def test_a_cancelled_connect_closes_its_socket_and_holds_no_task_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> tuple[_HangingConnects, set[asyncio.Task[Any]]]:
        loop = asyncio.get_running_loop()
        hanging = _HangingConnects(loop)
        monkeypatch.setattr(loop, "sock_connect", hanging.sock_connect)
        backend = _CancellableAsyncBackend(AutoBackend())
        connecting = asyncio.ensure_future(backend.connect_tcp("127.0.0.1", 9, timeout=None))
        await hanging.connecting.wait()
        ours = {asyncio.current_task(), connecting}
        connecting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await connecting
        return hanging, ours  # type: ignore[return-value]

    hanging, ours = asyncio.run(main())
    assert hanging.tasks_while_connecting == ours  # no task beside the connecting one
    assert [sock.fileno() for sock in hanging.sockets] == [-1]


class _Recording(httpcore2.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str | None]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        self.calls.append((host, port, local_address))
        raise httpcore2.ConnectError("recorded")


@pytest.mark.parametrize(
    ("default", "host", "local_address", "direct"),
    [
        (True, "127.0.0.1", None, True),
        (True, "::1", None, True),
        (True, "localhost", None, False),  # a name: anyio resolves it (happy eyeballs)
        (True, "127.0.0.1", "127.0.0.1", False),  # a local address to bind: anyio's
        (False, "127.0.0.1", None, False),  # a backend that is not httpcore2's default (a mock, legacy httpcore)
    ],
)
def test_which_connects_go_direct(
    default: bool, host: str, local_address: str | None, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = _Recording()
    backend = _CancellableAsyncBackend(AutoBackend() if default else inner)
    backend._inner = inner  # what the pool's own backend would have been asked
    directs: list[tuple[str, int]] = []

    async def fake_direct(family: socket.AddressFamily, host: str, port: int, *_: Any) -> Any:
        directs.append((host, port))
        raise httpcore2.ConnectError("direct")

    monkeypatch.setattr(asynchronous, "_connect_ip", fake_direct)

    async def main() -> None:
        with pytest.raises(httpcore2.ConnectError):
            await backend.connect_tcp(host, 443, timeout=1, local_address=local_address)

    asyncio.run(main())
    assert (directs == [(host, 443)], inner.calls == [(host, 443, local_address)]) == (direct, not direct)


def test_an_ipv6_address_connects_directly() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no ::1 on this machine")

    async def main() -> bytes:
        server, port, seen = await _echo_server("::1")
        async with server:
            stream = await _CancellableAsyncBackend(AutoBackend()).connect_tcp("::1", port, timeout=5)
            try:
                await stream.write(b"six", timeout=5)
                return await stream.read(1024, timeout=5)
            finally:
                await stream.aclose()
                while not seen:  # the server's side closed too
                    await asyncio.sleep(0)

    assert asyncio.run(main()) == b"six"


@pytest.mark.parametrize("own", [True, False], ids=["rxllm's pool", "your client"])
@pytest.mark.parametrize("end", ["whole", "broken off"])
def test_an_open_stream_of_rxllms_own_pool_keeps_no_sent_request(
    own: bool, end: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[weakref.ref[httpx2.Request]] = []
    build = httpx2.AsyncClient.build_request

    def recording(self: httpx2.AsyncClient, *args: Any, **kwargs: Any) -> httpx2.Request:
        request = build(self, *args, **kwargs)
        sent.append(weakref.ref(request))
        return request

    monkeypatch.setattr(httpx2.AsyncClient, "build_request", recording)
    release = threading.Event()
    stream = OPENAI.stream("one", "two")
    rest: list[Any] = [*stream[2:]] if end == "whole" else [Disconnect(reset=True)]
    kept_while_open: list[bool] = []

    async def main(url: str) -> tuple[list[str], BaseException | None]:
        client = None if own else httpx2.AsyncClient()
        transport = AsyncHttpTransport(loop=asyncio.get_running_loop(), max_concurrent_streams=4, http_client=client)
        model = OPENAI.model(url, transport=transport)
        texts: list[str] = []
        failure: BaseException | None = None
        try:
            async for response in model.generate_content(REQUEST, stream=True):
                texts.append(response.text())
                if len(texts) == 1:  # the server holds the rest: the stream is open
                    gc.collect()
                    kept_while_open.append(sent[0]() is not None)
                    release.set()
        except StreamInterruptedError as exc:
            failure = exc
        finally:
            await transport.aclose()
            if client is not None:
                await client.aclose()
        return texts, failure

    with StubServer([StubResponse(body=[*stream[:2], Hold(release, timeout=10), *rest])]) as server:
        try:
            texts, failure = asyncio.run(asyncio.wait_for(main(server.url), 20))
        finally:
            release.set()
    assert len(sent) == 1
    assert kept_while_open == [not own]
    if end == "whole":
        assert (texts, failure) == (["one", "two", "onetwo"], None)
    else:
        assert texts == ["one"]
        assert isinstance(failure, StreamInterruptedError)
