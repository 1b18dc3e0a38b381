"""Memory per open stream: N streams held open at once, rxllm against plain httpx2 in the same run.

Run::

    .venv/bin/python benchmarks/bench_open_streams.py --open 1000
    .venv/bin/python benchmarks/bench_open_streams.py --open 10000

Each contender runs in its own child process (so its memory is its own), against the same loopback
server (``_server.py``'s ``/hold``: the headers and one event, then the stream stays open). Each
holds ``--open`` streams open at once, every one having delivered its first item, on one asyncio
loop in the application's thread:

* ``httpx2 AsyncClient`` (the baseline): a task per stream, ``client.stream`` + ``aiter_lines``
  until the first ``data:`` line, then the task waits;
* ``rxllm subscribe``: ``generate_content(stream=True).subscribe(...)`` on an ``AsyncHttpTransport``
  bound to the running loop (``loop=``), the subscription kept;
* ``rxllm async for``: a task per stream, ``async for`` over ``generate_content(stream=True)`` on the
  same kind of transport, waiting after the first partial;
* ``openai AsyncOpenAI`` (when the ``openai`` package is installed): ``create(stream=True)``, a task
  per stream waiting after its first chunk.

Two figures per contender: RSS growth (``/proc/self/statm``, after a full collection) and the
Python heap's growth (``tracemalloc``, in a second child, since tracing slows the run down), both
divided by the count. The baseline row is measured in the same run; the target is at most 36 KiB
per open stream.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

CONTENDERS = ["httpx2 AsyncClient (baseline)", "rxllm subscribe", "rxllm async for", "openai AsyncOpenAI"]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


async def _hold(name: str, url: str, count: int) -> tuple[int, Any]:
    """Open ``count`` streams; return how many delivered their first item, and what to close them with."""
    ready = asyncio.Semaphore(0)
    release = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    if name.startswith("httpx2"):
        import httpx2

        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
        client = httpx2.AsyncClient(timeout=600, limits=limits)

        async def one() -> None:
            async with client.stream("POST", f"{url}/hold/1/chat/completions", json={"stream": True}) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        json.loads(line[6:])
                        ready.release()
                        await release.wait()
                        return

        async def close() -> None:
            release.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.aclose()
    elif name.startswith("openai"):
        import openai

        client = openai.AsyncOpenAI(base_url=f"{url}/hold/1", api_key="bench", max_retries=0, timeout=600)

        async def one() -> None:
            stream = await client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "go"}],
                                                          stream=True)
            async for _chunk in stream:
                ready.release()
                await release.wait()
                await stream.close()
                return

        async def close() -> None:
            release.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.close()
    else:
        from _contenders import REQUEST

        from rxllm import AsyncHttpTransport, RetryPolicy
        from rxllm.providers.openai import OpenAiChatModel

        transport = AsyncHttpTransport(loop=asyncio.get_running_loop(), max_concurrent_streams=count,
                                       read_timeout=600, connect_timeout=300)
        model = OpenAiChatModel("bench", base_url=f"{url}/hold/1", api_key="bench", transport=transport,
                                retry_policy=RetryPolicy.never())
        subscriptions: list[Any] = []
        if name == "rxllm subscribe":
            def on_next(_: object) -> None:
                ready.release()

            for _ in range(count):
                subscriptions.append(model.generate_content(REQUEST, stream=True).subscribe(on_next))

            async def one() -> None:
                raise AssertionError("no task per stream")
        else:
            async def one() -> None:
                async for _response in model.generate_content(REQUEST, stream=True):
                    ready.release()
                    await release.wait()
                    return

        async def close() -> None:
            release.set()
            for subscription in subscriptions:
                subscription.dispose()
            await asyncio.gather(*tasks, return_exceptions=True)
            await transport.aclose()
    if name != "rxllm subscribe":
        tasks.extend(asyncio.ensure_future(one()) for _ in range(count))
    async with asyncio.timeout(600):  # one timer for the whole wait: a wait_for per stream leaves a cancelled
        for _ in range(count):        # timer each in the loop's heap, purged only when most timers are cancelled
            await ready.acquire()     # (never beside rxllm's live read timers: 180 B per stream charged to it)
    return count, close


async def _child(name: str, url: str, count: int, traced: bool) -> dict[str, Any]:
    _, warm = await _hold(name, url, 10)  # warm-up: imports, the loop's machinery, first-use caches
    await warm()
    gc.collect()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if traced else _rss_bytes()
    opened, close = await _hold(name, url, count)
    gc.collect()
    during = tracemalloc.get_traced_memory()[0] if traced else _rss_bytes()
    await close()
    return {"open": opened, "bytes_per_stream": (during - before) / opened}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--open", type=int, default=1000, help="streams held open at once (default 1000)")
    parser.add_argument("--no-tracemalloc", action="store_true", help="RSS only")
    parser.add_argument("--child", nargs=3, metavar=("NAME", "URL", "TRACED"), help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "bench_open_streams.json")
    args = parser.parse_args()
    if args.child:
        name, url, traced = args.child
        print(json.dumps(asyncio.run(_child(name, url, args.open, traced == "1"))))
        return 0
    from _server import BenchServer

    try:
        import openai  # noqa: F401
        names = CONTENDERS
    except ImportError:
        names = CONTENDERS[:-1]
    rows = []
    with BenchServer() as server:
        for name in names:
            figures = {}
            for traced in ("0",) if args.no_tracemalloc else ("0", "1"):
                out = subprocess.run([sys.executable, __file__, "--open", str(args.open), "--child", name, server.url,
                                      traced], capture_output=True, text=True, check=True, timeout=1800)
                figures[traced] = json.loads(out.stdout.strip().splitlines()[-1])["bytes_per_stream"] / 1024
            rows.append({"contender": name, "rss_kib_per_stream": round(figures["0"], 1),
                         "python_heap_kib_per_stream": round(figures["1"], 1) if "1" in figures else None})
    base = rows[0]
    print(f"\n{args.open} streams open at once, each past its first item; KiB per open stream\n")
    header = f"{'contender':32} {'RSS KiB':>9} {'vs baseline':>12} {'tracemalloc KiB':>16} {'vs baseline':>12}"
    print(header)
    print("-" * len(header))
    for row in rows:
        heap = row["python_heap_kib_per_stream"]
        heap_text = f"{heap:16.1f} {heap / base['python_heap_kib_per_stream']:11.2f}×" if heap is not None else ""
        print(f"{row['contender']:32} {row['rss_kib_per_stream']:9.1f} "
              f"{row['rss_kib_per_stream'] / base['rss_kib_per_stream']:11.2f}× {heap_text}")
    print("(target: rxllm at most 36 KiB per open stream)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"open": args.open, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
