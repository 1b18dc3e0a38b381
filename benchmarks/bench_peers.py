"""The peers table: rxllm and other Python LLM clients on the same bodies, CPU µs per chunk against the floor.

Run (``make bench-peers``; the peers are not project dependencies: install the ones you want to
compare into a throwaway virtual environment and put this project's on the path after it)::

    python -m venv /tmp/peers
    /tmp/peers/bin/pip install anthropic "pydantic-ai-slim[openai]" langchain-openai litellm
    PYTHONPATH=$PWD:$PWD/.venv/lib/python3.11/site-packages /tmp/peers/bin/python benchmarks/bench_peers.py

A peer that is not installed gets a row that says so. Every contender reads the same pre-encoded
body (``--chunks`` text chunks) of its wire format from the same loopback server (``_server.py``),
interleaved rep by rep; the figure is the CPU time of this process (``time.process_time``: every
thread; the server is another process) per chunk, the median of ``--reps``, and its ratio to the
floor of the same wire format (httpx2 ``iter_lines`` + ``json.loads`` + join) in the same run. Each
contender's final text is checked against the body's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _contenders import floor_anthropic, floor_gemini, floor_text, rxllm_runner
from _server import BenchServer, tokens

Text = Callable[[str, int], str]  # (server url, chunks) -> the final text
MESSAGES = [{"role": "user", "content": "go"}]


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _of_runner(run: Callable[[str, int], tuple[float, float, int]], kind: str) -> Text:
    def text(url: str, n: int) -> str:
        size = run(url, n)[2]
        return "".join(tokens(n)) if size == len("".join(tokens(n))) else f"{size} characters"

    return text


def _openai_sync(url: str, n: int) -> str:
    import openai

    with openai.OpenAI(base_url=f"{url}/text/{n}", api_key="bench", max_retries=0) as client:
        stream = client.chat.completions.create(model="bench", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def _openai_async(url: str, n: int) -> str:
    import openai

    async def main() -> str:
        async with openai.AsyncOpenAI(base_url=f"{url}/text/{n}", api_key="bench", max_retries=0) as client:
            stream = await client.chat.completions.create(model="bench", messages=MESSAGES,  # type: ignore[arg-type]
                                                          stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    return asyncio.run(main())


def _openai_helper(url: str, n: int) -> str:
    import openai

    with (
        openai.OpenAI(base_url=f"{url}/text/{n}", api_key="bench", max_retries=0) as client,
        client.chat.completions.stream(model="bench", messages=MESSAGES) as stream,  # type: ignore[arg-type]
    ):
        for _event in stream:
            pass
        return stream.get_final_completion().choices[0].message.content or ""


def _anthropic(url: str, n: int) -> str:
    import anthropic

    with (
        anthropic.Anthropic(base_url=f"{url}/anthropic/{n}", api_key="bench", max_retries=0) as client,
        client.messages.stream(model="bench", max_tokens=10, messages=MESSAGES) as stream,  # type: ignore[arg-type]
    ):
        return "".join(stream.text_stream)


def _genai(url: str, n: int) -> str:
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="bench", http_options=types.HttpOptions(base_url=f"{url}/gemini/{n}"))
    try:
        stream = client.models.generate_content_stream(model="bench", contents="go")
        return "".join(chunk.text or "" for chunk in stream)
    finally:
        client.close()


def _langchain(url: str, n: int) -> str:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="bench", base_url=f"{url}/text/{n}", api_key="bench", max_retries=0)  # type: ignore[arg-type]
    return "".join(str(chunk.content) for chunk in model.stream("go"))


def _pydantic_ai(url: str, n: int) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(base_url=f"{url}/text/{n}", api_key="bench"))
    agent = Agent(model)

    async def main() -> str:
        async with agent.run_stream("go") as result:
            return "".join([piece async for piece in result.stream_text(delta=True)])

    return asyncio.run(main())


def _litellm(url: str, n: int) -> str:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its price list from the network
    import litellm

    stream = litellm.completion(model="openai/bench", api_base=f"{url}/text/{n}", api_key="bench", messages=MESSAGES,
                                stream=True, num_retries=0)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


# (name, wire format, the distribution whose version the row shows, how it is run)
PEERS: list[tuple[str, str, str, Callable[[], Text]]] = [
    ("openai SDK create(stream=True)", "text", "openai", lambda: _openai_sync),
    ("openai SDK AsyncOpenAI create(stream=True)", "text", "openai", lambda: _openai_async),
    ("openai SDK .stream() helper", "text", "openai", lambda: _openai_helper),
    ("anthropic SDK messages.stream()", "anthropic", "anthropic", lambda: _anthropic),
    ("google-genai generate_content_stream", "gemini", "google-genai", lambda: _genai),
    ("langchain-openai ChatOpenAI.stream", "text", "langchain-openai", lambda: _langchain),
    ("pydantic-ai Agent.run_stream", "text", "pydantic-ai-slim", lambda: _pydantic_ai),
    ("litellm completion(stream=True)", "text", "litellm", lambda: _litellm),
]
IMPORTS = {"openai": "openai", "anthropic": "anthropic", "google-genai": "google.genai",
           "langchain-openai": "langchain_openai", "pydantic-ai-slim": "pydantic_ai", "litellm": "litellm"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=2000, help="chunks per stream (default 2000)")
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_peers.json")
    args = parser.parse_args()
    floors = {"text": floor_text, "anthropic": floor_anthropic, "gemini": floor_gemini}
    contenders: dict[str, tuple[str, str, Text]] = {}
    for kind, floor in floors.items():
        contenders[f"floor, {kind} (httpx2 iter_lines + json.loads)"] = (kind, "httpx2", _of_runner(floor, kind))
        contenders[f"rxllm, {kind}, partials dropped"] = (kind, "rxllm", _of_runner(rxllm_runner(kind), kind))
    missing: list[tuple[str, str]] = []
    for name, kind, distribution, make in PEERS:
        try:
            importlib.import_module(IMPORTS[distribution])
        except ImportError as error:
            missing.append((name, f"not installed ({error.name})"))
            continue
        contenders[name] = (kind, distribution, make())
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    failed: dict[str, str] = {}
    with BenchServer() as server:
        for name, (_, _, run) in list(contenders.items()):  # warm-up, and the text check
            try:
                got = run(server.url, 50)
            except Exception as error:  # a peer that cannot talk to the loopback server: say so
                failed[name] = f"failed: {type(error).__name__}: {str(error)[:80]}"
                continue
            if got != "".join(tokens(50)):
                failed[name] = f"wrong text ({got[:40]!r})"
        for name in failed:
            del contenders[name]
        for _ in range(args.reps):
            for name, (_, _, run) in contenders.items():
                started = time.process_time()
                run(server.url, args.chunks)
                cpu[name].append(time.process_time() - started)
    floor_of = {kind: statistics.median(cpu[f"floor, {kind} (httpx2 iter_lines + json.loads)"]) for kind in floors}
    print(f"\n{args.chunks} chunks per stream, {args.reps} interleaved reps, CPU medians; python "
          f"{sys.version.split()[0]}\n")
    header = f"{'contender':46} {'version':>10} {'body':>10} {'CPU µs/chunk':>13} {'vs floor':>9}"
    print(header)
    print("-" * len(header))
    rows = []
    for name, (kind, distribution, _) in contenders.items():
        seconds = statistics.median(cpu[name])
        version = "" if distribution == "rxllm" else _version(distribution)
        rows.append({"contender": name, "version": version, "body": kind,
                     "cpu_us_per_chunk": round(seconds / args.chunks * 1e6, 2),
                     "ratio_to_floor": round(seconds / floor_of[kind], 2)})
        print(f"{name:46} {version:>10} {kind:>10} {seconds / args.chunks * 1e6:13.2f} "
              f"{seconds / floor_of[kind]:8.2f}×")
    for name, why in missing + list(failed.items()):
        rows.append({"contender": name, "note": why})
        print(f"{name:46} {why}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"chunks": args.chunks, "reps": args.reps, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
