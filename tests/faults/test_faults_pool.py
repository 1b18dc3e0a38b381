"""Pools: idle keep-alive connections are closed once ``keepalive_expiry`` passes
(the server sees it, with no further request), and a fresh asyncio transport builds its pools
lazily (its first request costs about what the threaded transport's does)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder
from wire import OPENAI

from rxllm import AsyncHttpTransport, HttpTransport, RetryPolicy
from rxllm.testing import StubResponse, StubServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_an_idle_connection_is_closed_after_keepalive_expiry(kind: str) -> None:
    cls = HttpTransport if kind == "threads" else AsyncHttpTransport
    transport = cls(max_concurrent_streams=2, keepalive_expiry=0.3)
    try:
        with StubServer([StubResponse.json(200, OPENAI.complete_body("kept alive"))]) as server:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            recorder = Recorder()
            recorder.subscribe(model.generate_content(REQUEST, stream=False))
            recorder.wait("a non-streamed call")
            assert recorder.completed and recorder.items[0].text() == "kept alive"
            (connection,) = server.connections
            # No other request and no close(): only the pruner can close it.
            assert connection.wait_closed_by_client(6 * TIMEOUT), "the idle connection outlived keepalive_expiry"
    finally:
        transport.close()



def test_closing_the_last_threaded_transport_ends_the_idle_connection_pruner() -> None:
    # In a fresh process: elsewhere in the suite the process-wide default transport keeps a pruner.
    child = textwrap.dedent(
        """
        import threading
        from rxllm import HttpTransport

        def pruners():
            return [t for t in threading.enumerate() if t.name == "rxllm-pruner"]

        transports = [HttpTransport(max_concurrent_streams=1), HttpTransport(max_concurrent_streams=1)]
        assert len(pruners()) == 1, "one pruner thread watches every threaded transport"
        transports[0].close()
        assert len(pruners()) == 1, "the pruner ended while a transport still needs it"
        transports[1].close()
        assert not pruners(), "a pruner thread outlived every transport"
        HttpTransport(max_concurrent_streams=1).close()  # a later transport starts (and ends) its own
        assert not pruners(), "the second pruner outlived its transport"
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60,
                            cwd=ROOT, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/faults"]
    from faults_support import REQUEST, Recorder
    from wire import OPENAI
    from rxllm import AsyncHttpTransport, HttpTransport
    from rxllm.testing import StubServer

    def first_call(cls, url):
        started = time.process_time()
        transport = cls()  # the defaults: 128 threaded streams, 10,000 asyncio streams
        recorder = Recorder()
        recorder.subscribe(OPENAI.model(url, transport=transport).generate_content(REQUEST, stream=True))
        recorder.wait("first call", timeout=60)
        assert recorder.completed, recorder.errors
        spent = time.process_time() - started
        transport.close()
        return spent

    with StubServer([OPENAI.response("a")] * 8) as server:
        first_call(HttpTransport, server.url)  # imports and the stub server warmed up
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        first_call(AsyncHttpTransport, server.url)  # the first one also imports httpx's async stack
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        threads = min(first_call(HttpTransport, server.url) for _ in range(3))
        asyncio_cpu = min(first_call(AsyncHttpTransport, server.url) for _ in range(3))
    print(threads, asyncio_cpu, grown // 1024)
    """
)


def test_a_fresh_asyncio_transport_builds_its_pools_lazily() -> None:
    result = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT)], capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    threads, asyncio_cpu, grown_mb = (float(x) for x in result.stdout.split()[-3:])
    # Building all 40 pools eagerly cost ~0.9 s of CPU and +33 MB (a fresh transport's first request,
    # imports done); lazily about as much as the threaded transport's. CPU time as a ratio, generous.
    assert grown_mb < 16, f"the first asyncio request grew the process by {grown_mb} MB"
    assert asyncio_cpu < 3 * threads + 0.02, (threads, asyncio_cpu)
