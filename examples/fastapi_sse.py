"""Relay a model's stream to a browser as Server-Sent Events, from a FastAPI app.

``GET /chat?q=...`` answers ``text/event-stream``: one ``data:`` event per partial (its new
text, as JSON) as soon as the model streams it, then an ``event: done`` with the whole answer.
The endpoint iterates the model's Observable with ``async for``: each partial arrives on the
app's event loop, and when the browser goes away the server cancels the response, which leaves
the ``async for`` and disposes the model call -- the upstream connection closes at once.

Run it as a script and it checks exactly that, with no network and no key: an embedded stub
server plays the model (a long answer, paced), uvicorn serves the app on loopback, a client
reads three events and hangs up, and the stub server reports that rxllm closed its connection::

    python examples/fastapi_sse.py                      # the self-check (threaded transport)
    python examples/fastapi_sse.py --transport asyncio  # the same on AsyncHttpTransport
    python examples/fastapi_sse.py --serve              # serve on http://127.0.0.1:8000 for a browser

Against a real model, build ``make_app(OpenAiChatModel("gpt-4o-mini"))`` and run it with
``uvicorn``. It exits 0 when the upstream connection closed after the client hung up, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
from collections.abc import AsyncIterator, Sequence

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

import rxllm.aio
from rxllm import AsyncHttpTransport, BaseLlm, Content, HttpTransport, LlmRequest, Part
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Hold, StubResponse, StubServer, sse_turn

ANSWER_WORDS = 400  # long enough that the client hangs up long before the model is done
PACE = 0.01  # seconds between the stub model's events


def make_app(model: BaseLlm) -> FastAPI:
    """The app: ``GET /chat?q=...`` relays ``model``'s answer as SSE."""
    app = FastAPI()

    @app.get("/chat")
    async def chat(q: str) -> StreamingResponse:
        request = LlmRequest(contents=[Content(role="user", parts=[Part.from_text(q)])])
        return StreamingResponse(relay(model, request), media_type="text/event-stream")

    return app


async def relay(model: BaseLlm, request: LlmRequest) -> AsyncIterator[str]:
    """The SSE body. Leaving the ``async for`` early (the client hung up: the server cancels this
    generator) disposes the model call, which closes its connection."""
    # iterate(): any BaseLlm, including one whose generate_content returns a plain Observable
    async for response in rxllm.aio.iterate(model.generate_content(request, stream=True)):
        if response.partial:
            yield f"data: {json.dumps({'text': response.text()})}\n\n"
        else:
            yield f"event: done\ndata: {json.dumps({'text': response.text()})}\n\n"


def stub_answer(*, hold: threading.Event | None = None) -> StubResponse:
    """A long answer, paced; with ``hold``, the model stalls after five events until it is set, so
    only the client can end the connection (a model that finished would close it too)."""
    words = [("" if i == 0 else " ") + f"word{i}" for i in range(ANSWER_WORDS)]
    events = sse_turn("openai-chat", text=words)
    if hold is None:
        return StubResponse.sse(events, delay=PACE)
    return StubResponse(body=[*events[:5], Hold(hold), *events[5:]])


async def check(app: FastAPI, stub: StubServer) -> bool:
    """Serve ``app`` with uvicorn on loopback, read three events as a browser would, hang up,
    and report whether the model's upstream connection was closed."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.ensure_future(server.serve(sockets=[listener]))
    try:
        # (the socket already listens: a connection made before uvicorn accepts waits in its backlog)
        events: list[str] = []
        url = f"http://127.0.0.1:{port}/chat"
        async with httpx.AsyncClient(timeout=10) as client, client.stream("GET", url, params={"q": "A story"}) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[len("data: "):])["text"])
                    print(f"browser: got event {len(events)}: {events[-1]!r}")
                    if len(events) == 3:
                        break  # the browser tab closes
        print("browser: hung up after 3 of", ANSWER_WORDS, "events")
        upstream = await asyncio.to_thread(stub.wait_for_connection, 1, 5.0)
        closed = upstream is not None and await asyncio.to_thread(upstream.wait_closed_by_client, 5.0)
        print(f"stub model: upstream connection closed by the client: {closed}")
        return closed
    finally:
        server.should_exit = True
        await serving


def main(argv: Sequence[str] | None = None) -> int:
    """Run the self-check (or serve, with ``--serve``); return 0 when the upstream closed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["threads", "asyncio"], default="threads")
    parser.add_argument("--serve", action="store_true", help="serve on http://127.0.0.1:8000 until Ctrl-C")
    args = parser.parse_args(argv)

    hold = None if args.serve else threading.Event()
    with StubServer(responder=lambda _: stub_answer(hold=hold)) as stub:
        transport = HttpTransport() if args.transport == "threads" else AsyncHttpTransport(max_concurrent_streams=64)
        model = OpenAiChatModel("gpt-4o-mini", base_url=f"{stub.url}/v1", api_key="sk-example", transport=transport)
        app = make_app(model)
        try:
            if args.serve:
                print("open http://127.0.0.1:8000/chat?q=hello (Ctrl-C to stop)")
                uvicorn.run(app, host="127.0.0.1", port=8000, log_level="info")
                return 0
            closed = asyncio.run(check(app, stub))
        finally:
            if hold is not None:
                hold.set()
            transport.close()
    print("fastapi sse: OK" if closed else "fastapi sse: FAILED (the upstream connection stayed open)")
    return 0 if closed else 1


if __name__ == "__main__":
    sys.exit(main())
