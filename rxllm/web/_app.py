"""The development server: ADK's ``api_server`` / ``web`` routes over rxllm's agent runtime.

The routes, their JSON field names (camelCase, ``None`` fields dropped) and the SSE framing of
``/run_sse`` (one ``data: {event}`` line per event, ``data: {"error": "..."}`` when the run fails)
are ADK Python's (``google.adk.cli.fast_api.get_fast_api_app``), so ADK's own clients and dev UI
talk to it unchanged. ADK Java's ``dev`` module (``AdkWebServer``) serves the same routes.

Each ``/run_sse`` request is one subscription to :meth:`Runner.run_async`, iterated on the event
loop (:func:`rxllm.aio.iterate`): when the client goes away the server cancels the response,
which disposes the subscription -- the model's upstream connection closes and no further tool
runs.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar, Literal

import reactivex
from fastapi import FastAPI, HTTPException, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

from .._core.errors import ConfigurationError, RxLlmError
from .._core.types import Content, Part
from .._rx import aio
from .._rx.direct import collect_then, defer_now, ignore_items, nothing_now, then_now
from .._telemetry.otel import configure_telemetry
from ..agents import (
    BaseArtifactService,
    BaseMemoryService,
    BaseSessionService,
    Event,
    EventActions,
    InMemoryMemoryService,
    LiveRequest,
    LiveRequestQueue,
    RunConfig,
    Runner,
    Session,
    StreamingMode,
)
from ._dev_routes import add_dev_routes, add_eval_routes, app_info
from ._dev_routes import json_response as _json
from ._loader import AgentLoader, AppLoadError, LoadedApp, check_app_name, check_id
from ._services import artifact_service_from_uri, close_service, session_service_from_uri
from ._traces import EventLinks, SpanStore

__all__ = ["AgentRunRequest", "create_app"]

STATIC_DIR = Path(__file__).resolve().parent / "static"


class _CamelModel(BaseModel):
    """Built by snake_case name or camelCase alias, as ADK's request bodies; unknown fields are ignored."""

    model_config: ClassVar[ConfigDict] = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class AgentRunRequest(_CamelModel):
    """ADK's run request (``/run``, ``/run_sse``): which session, the new message, streaming or not.

    ``state_delta`` (ADK's ``stateDelta``) is stored with the message, before the agent runs.
    """

    app_name: str
    user_id: str
    session_id: str
    new_message: Content
    streaming: bool = False
    state_delta: dict[str, JsonValue] | None = None


class UpdateSessionRequest(_CamelModel):
    """ADK's session patch: a state delta, stored without running the agent."""

    state_delta: dict[str, JsonValue]


class CreateSessionRequest(_CamelModel):
    """ADK's create-session body: an optional id, initial state and events to store first."""

    session_id: str | None = None
    state: dict[str, JsonValue] | None = None
    events: list[Event] | None = None


class _Server:
    """The state one app instance serves: loader, stores, runners, traces."""

    def __init__(
        self,
        loader: AgentLoader,
        session_service: BaseSessionService,
        artifact_service: BaseArtifactService,
        memory_service: BaseMemoryService,
        spans: SpanStore | None,
    ) -> None:
        self.loader = loader
        self.session_service = session_service
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        self.spans = spans
        self._runners: dict[str, tuple[LoadedApp, Runner]] = {}
        self._lock = threading.Lock()
        self.links = EventLinks()

    def check(self, app_name: str, *ids: str) -> None:
        """400 for a name that is no plain name (path traversal), 404 for an unknown app."""
        if not check_app_name(app_name):
            raise HTTPException(status_code=400, detail=f"invalid app name: {app_name!r}")
        for value in ids:
            if not check_id(value):
                raise HTTPException(status_code=400, detail=f"invalid id: {value!r}")
        if not self.loader.exists(app_name):
            raise HTTPException(status_code=404, detail=f"App not found: {app_name}")

    def runner(self, app_name: str) -> Runner:
        """The app's runner (a new one when the app was reloaded); 500 with the load error."""
        try:
            loaded = self.loader.load(app_name)
        except AppLoadError as exc:
            raise HTTPException(status_code=500, detail=str(exc)) from exc
        with self._lock:
            cached = self._runners.get(app_name)
            if cached is not None and cached[0] is loaded:
                return cached[1]
            runner = Runner(
                loaded.root_agent,
                app_name,
                self.session_service,
                artifact_service=self.artifact_service,
                memory_service=self.memory_service,
                plugins=loaded.plugins,
            )
            self._runners[app_name] = (loaded, runner)
            return runner

    async def session(self, app_name: str, user_id: str, session_id: str) -> Session | None:
        found: Session | None = await aio.last(
            self.session_service.get_session(app_name, user_id, session_id), None
        )
        return found

    def remember(self, event: Event) -> None:
        """Note a streamed event, so ``/debug/trace/{event_id}`` finds the span that produced it."""
        if self.spans is None or not event.invocation_id:
            return
        self.links.add(event.id, event.invocation_id, is_user=event.author == "user", partial=bool(event.partial),
                       response_ids=[r.id for r in event.function_responses()])

    def store_state_delta(self, app_name: str, user_id: str, session_id: str,
                          delta: dict[str, JsonValue]) -> reactivex.Observable[Event]:
        """Append a user event carrying ``delta`` to the session, in the session's run queue."""
        service = self.session_service

        def append(sessions: list[Session]) -> reactivex.Observable[Event]:
            if not sessions:
                return nothing_now()
            return service.append_event(sessions[-1], Event(author="user", actions=EventActions(state_delta=delta)))

        return service.serialize_run(
            app_name, user_id, session_id,
            defer_now(lambda: collect_then(service.get_session(app_name, user_id, session_id), append)),
        )

    def run(self, req: AgentRunRequest, mode: StreamingMode) -> reactivex.Observable[Event]:
        """The request's run: its state delta stored first (in the session's run queue), then the agent."""
        runner = self.runner(req.app_name)
        run: reactivex.Observable[Event] = runner.run_async(
            req.user_id, req.session_id, req.new_message, RunConfig(streaming_mode=mode)
        )
        if not req.state_delta:
            return run
        stored = self.store_state_delta(req.app_name, req.user_id, req.session_id, dict(req.state_delta))
        return then_now(ignore_items(stored), lambda: run)


def create_app(
    agents_dir: str | Path,
    *,
    session_service: BaseSessionService | None = None,
    artifact_service: BaseArtifactService | None = None,
    memory_service: BaseMemoryService | None = None,
    session_service_uri: str | None = None,
    artifact_service_uri: str | None = None,
    web: bool = True,
    ui_dir: str | Path | None = None,
    reload: bool = False,
    trace: bool = False,
    allow_origins: list[str] | None = None,
) -> FastAPI:
    """The ASGI app serving the apps of ``agents_dir`` (ADK Python's ``get_fast_api_app``).

    Args:
        agents_dir: a folder of apps: each a package or module defining ``root_agent``.
        session_service: where sessions live; default: from ``session_service_uri``, else in memory.
        artifact_service: where artifacts live; default: from ``artifact_service_uri``, else in memory.
        memory_service: what the ``load_memory`` tool searches; default: in memory.
        session_service_uri: ``sqlite:///path.db`` or ``postgresql://...`` (closed with the app).
        artifact_service_uri: ``file:///folder`` (closed with the app).
        web: also serve the browser UI at ``/dev-ui/`` (and redirect ``/`` there).
        ui_dir: serve this folder as the UI instead of rxllm's (e.g. ADK's built
            ``google/adk/cli/browser``).
        reload: re-import an app whose files changed since it was loaded.
        trace: keep rxllm's OpenTelemetry spans for ``/debug/trace`` (needs ``opentelemetry-sdk``;
            it sets rxllm's tracer provider with :func:`rxllm.configure_telemetry` for the app's
            lifetime and restores the default when the app shuts down).
        allow_origins: CORS origins allowed to call the API (none by default).
    """
    if session_service is not None and session_service_uri is not None:
        raise ConfigurationError("pass session_service or session_service_uri, not both")
    if artifact_service is not None and artifact_service_uri is not None:
        raise ConfigurationError("pass artifact_service or artifact_service_uri, not both")
    owned: list[object] = []
    if session_service is None:
        session_service = session_service_from_uri(session_service_uri)
        owned.append(session_service)
    if artifact_service is None:
        artifact_service = artifact_service_from_uri(artifact_service_uri)
        owned.append(artifact_service)
    spans = _start_tracing() if trace else None
    server = _Server(
        AgentLoader(agents_dir, reload=reload),
        session_service,
        artifact_service,
        memory_service if memory_service is not None else InMemoryMemoryService(),
        spans,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for service in owned:
                close_service(service)
            if spans is not None:
                configure_telemetry()

    app = FastAPI(title="rxllm agents", lifespan=lifespan)
    app.state.rxllm = server
    if allow_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=allow_origins, allow_credentials=True,
                           allow_methods=["*"], allow_headers=["*"])

    @app.exception_handler(ConfigurationError)
    async def bad_input(_: Request, exc: ConfigurationError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.get("/list-apps")
    def list_apps(detailed: bool = False) -> Response:
        names = server.loader.list_apps()
        if not detailed:
            return _json(names)
        apps = []
        for name in names:
            entry: dict[str, Any] = {"name": name}
            try:
                loaded = server.loader.load(name)
            except AppLoadError as exc:
                entry["error"] = str(exc)  # rxllm's addition: ADK leaves a broken app out
            else:
                entry.update(app_info(name, loaded.root_agent, with_agents=False))
            apps.append(entry)
        return _json({"apps": apps})

    sessions = "/apps/{app_name}/users/{user_id}/sessions"

    @app.get(sessions + "/{session_id}")
    async def get_session(app_name: str, user_id: str, session_id: str) -> Response:
        server.check(app_name, user_id, session_id)
        session = await server.session(app_name, user_id, session_id)
        if session is None:
            raise HTTPException(status_code=404, detail="Session not found")
        return _json(session)

    @app.get(sessions)
    async def list_sessions(app_name: str, user_id: str) -> Response:
        server.check(app_name, user_id)
        found: list[Session] = await aio.last(server.session_service.list_sessions(app_name, user_id), [])
        return _json([s for s in found if not s.id.startswith("___eval___session___")] or [])

    async def create(app_name: str, user_id: str, session_id: str | None, state: dict[str, JsonValue] | None,
                     events: list[Event] | None) -> Response:
        if session_id is not None:
            server.check(app_name, user_id, session_id)
            if await server.session(app_name, user_id, session_id) is not None:
                raise HTTPException(status_code=400, detail=f"Session already exists: {session_id}")
        else:
            server.check(app_name, user_id)
        service = server.session_service
        session: Session = await aio.last(service.create_session(app_name, user_id, state, session_id))
        for event in events or ():
            await aio.last(service.append_event(session, event), None)
        if events:
            session = await server.session(app_name, user_id, session.id) or session
        return _json(session)

    @app.post(sessions + "/{session_id}")
    async def create_session_with_id(
        app_name: str, user_id: str, session_id: str, state: dict[str, JsonValue] | None = None
    ) -> Response:
        return await create(app_name, user_id, session_id, state, None)

    @app.post(sessions)
    async def create_session(app_name: str, user_id: str, body: CreateSessionRequest | None = None) -> Response:
        body = body or CreateSessionRequest()
        return await create(app_name, user_id, body.session_id, body.state, body.events)

    @app.delete(sessions + "/{session_id}")
    async def delete_session(app_name: str, user_id: str, session_id: str) -> Response:
        server.check(app_name, user_id, session_id)
        await aio.last(server.session_service.delete_session(app_name, user_id, session_id), None)
        return _json(None)

    @app.patch(sessions + "/{session_id}")
    async def update_session(app_name: str, user_id: str, session_id: str, req: UpdateSessionRequest) -> Response:
        """ADK's state edit without a run: one user event carrying the delta, in the session's run queue."""
        server.check(app_name, user_id, session_id)
        if await server.session(app_name, user_id, session_id) is None:
            raise HTTPException(status_code=404, detail="Session not found")
        await aio.last(ignore_items(server.store_state_delta(app_name, user_id, session_id, dict(req.state_delta))),
                       None)
        return _json(await server.session(app_name, user_id, session_id))

    artifacts = sessions + "/{session_id}/artifacts"

    async def load_artifact_part(app_name: str, user_id: str, session_id: str, name: str,
                                 version: int | None) -> Response:
        server.check(app_name, user_id, session_id)
        part: Part | None = await aio.last(
            server.artifact_service.load_artifact(app_name, user_id, session_id, name, version), None
        )
        if part is None:
            raise HTTPException(status_code=404, detail="Artifact not found")
        return _json(part)

    @app.get(artifacts + "/{artifact_name}")
    async def load_artifact(app_name: str, user_id: str, session_id: str, artifact_name: str,
                            version: int | None = Query(None)) -> Response:
        return await load_artifact_part(app_name, user_id, session_id, artifact_name, version)

    @app.get(artifacts + "/{artifact_name}/versions/{version_id}")
    async def load_artifact_version(app_name: str, user_id: str, session_id: str, artifact_name: str,
                                    version_id: int) -> Response:
        return await load_artifact_part(app_name, user_id, session_id, artifact_name, version_id)

    @app.get(artifacts)
    async def list_artifact_names(app_name: str, user_id: str, session_id: str) -> Response:
        server.check(app_name, user_id, session_id)
        return _json(await aio.last(server.artifact_service.list_artifact_keys(app_name, user_id, session_id), []))

    @app.get(artifacts + "/{artifact_name}/versions")
    async def list_artifact_versions(app_name: str, user_id: str, session_id: str, artifact_name: str) -> Response:
        server.check(app_name, user_id, session_id)
        versions = server.artifact_service.list_versions(app_name, user_id, session_id, artifact_name)
        return _json(await aio.last(versions, []))

    @app.delete(artifacts + "/{artifact_name}")
    async def delete_artifact(app_name: str, user_id: str, session_id: str, artifact_name: str) -> Response:
        server.check(app_name, user_id, session_id)
        await aio.last(server.artifact_service.delete_artifact(app_name, user_id, session_id, artifact_name), None)
        return _json(None)

    async def checked_session(app_name: str, user_id: str, session_id: str) -> None:
        server.check(app_name, user_id, session_id)
        if await server.session(app_name, user_id, session_id) is None:
            raise HTTPException(status_code=404, detail="Session not found")

    async def checked_run(req: AgentRunRequest) -> None:
        await checked_session(req.app_name, req.user_id, req.session_id)

    @app.post("/run")
    async def agent_run(req: AgentRunRequest) -> Response:
        await checked_run(req)
        run = server.run(req, StreamingMode.NONE)
        events: list[Event] = []
        try:
            async with aio.iterate(run) as stream:
                async for event in stream:
                    server.remember(event)
                    events.append(event)
        except RxLlmError as exc:
            raise HTTPException(status_code=500, detail=str(exc)) from exc
        return _json(events if events else [])

    @app.post("/run_sse")
    async def agent_run_sse(req: AgentRunRequest) -> StreamingResponse:
        await checked_run(req)
        run = server.run(req, StreamingMode.SSE if req.streaming else StreamingMode.NONE)

        async def frames() -> AsyncIterator[str]:
            try:
                async with aio.iterate(run) as stream:
                    async for event in stream:
                        server.remember(event)
                        yield f"data: {event.model_dump_json(by_alias=True, exclude_none=True)}\n\n"
            except RxLlmError as exc:
                yield f"data: {json.dumps({'error': str(exc)})}\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.websocket("/run_live")
    async def agent_live_run(
        websocket: WebSocket,
        app_name: str,
        user_id: str,
        session_id: str,
        modalities: list[Literal["TEXT", "AUDIO"]] = Query(default=["TEXT", "AUDIO"]),  # noqa: B008
    ) -> None:
        await websocket.accept()
        try:
            await checked_session(app_name, user_id, session_id)
            runner = server.runner(app_name)
        except HTTPException as exc:  # ADK accepts, then closes with 1002 and the reason
            await websocket.close(code=1002, reason=str(exc.detail)[:_MAX_CLOSE_REASON])
            return
        queue = LiveRequestQueue()
        run = runner.run_live(user_id=user_id, session_id=session_id, live_request_queue=queue,
                              run_config=RunConfig(response_modalities=tuple(modalities)))
        await _serve_live(websocket, server, run, queue)

    add_dev_routes(app, server, web=web)
    add_eval_routes(app, server)

    if web:
        ui = Path(ui_dir) if ui_dir is not None else STATIC_DIR
        if not (ui / "index.html").is_file():
            raise ConfigurationError(f"the UI folder {ui} has no index.html")

        @app.get("/")
        def root() -> RedirectResponse:
            return RedirectResponse("/dev-ui/")

        @app.get("/dev-ui")
        def dev_ui() -> RedirectResponse:
            return RedirectResponse("/dev-ui/")

        app.mount("/dev-ui/", StaticFiles(directory=ui, html=True), name="dev-ui")
    return app


_MAX_CLOSE_REASON = 123  # a close frame's reason fits 123 bytes


async def _serve_live(websocket: WebSocket, server: _Server, run: reactivex.Observable[Event],
                      queue: LiveRequestQueue) -> None:
    """ADK's ``/run_live`` loop: each text frame is a ``LiveRequest`` put on the queue; each event of
    the run goes out as one text frame of ``Event`` JSON.

    The run ends the socket: completed (the client sent ``{"close": true}``) with 1000, failed with
    1011 and the error. A frame that is no ``LiveRequest`` closes it with 1007 and the reason. A
    client that goes away cancels the forwarding, which disposes the run (the model's connection
    closes, no tool starts).
    """

    async def forward() -> tuple[int, str]:
        try:
            async with aio.iterate(run) as stream:
                async for event in stream:
                    server.remember(event)
                    await websocket.send_text(event.model_dump_json(by_alias=True, exclude_none=True))
        except RxLlmError as exc:
            return 1011, str(exc)
        return 1000, ""

    async def receive() -> tuple[int, str]:
        while True:
            try:
                frame = await websocket.receive_text()
            except (KeyError, RuntimeError):  # a binary frame, or a client that went away
                return 1003, "a /run_live frame is a LiveRequest's JSON text"
            try:
                queue.send(LiveRequest.model_validate_json(frame))
            except (ValidationError, RxLlmError) as exc:
                return 1007, f"not a LiveRequest: {exc}"

    tasks = [asyncio.ensure_future(forward()), asyncio.ensure_future(receive())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        first = done.pop()
        if first.exception() is not None and isinstance(first.exception(), WebSocketDisconnect):
            return
        code, reason = first.result()
        with suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close(code=code, reason=reason.encode()[:_MAX_CLOSE_REASON].decode(errors="ignore"))
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await task
        if not queue.closed:
            queue.close()


def _start_tracing() -> SpanStore:
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as exc:
        raise ConfigurationError("trace=True needs opentelemetry-sdk: pip install opentelemetry-sdk") from exc
    store = SpanStore()
    provider = TracerProvider()
    provider.add_span_processor(store.processor())
    configure_telemetry(tracer_provider=provider)
    return store
