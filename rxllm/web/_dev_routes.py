"""The dev server's routes beyond sessions and runs: what ADK's own dev UI asks for, traces, eval sets.

ADK Python 1.x serves the eval and trace routes at the top (``/apps/{app}/eval_sets``,
``/debug/trace/{event_id}``); ADK 2.x moved them under ``/dev`` (``/dev/apps/{app}/eval_sets``,
``/dev/apps/{app}/debug/trace/{event_id}``) and added hyphenated forms with wrapped answers
(``/dev/apps/{app}/eval-sets`` answers ``{"evalSetIds": [...]}``). rxllm serves every form, with
ADK's JSON field names, so either generation of ADK's UI and clients works against it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .._core.version import __version__
from ..agents import BaseAgent, Event, Runner, Session
from ._eval import (
    METRICS_INFO,
    EvalCase,
    EvalSet,
    EvalSetResult,
    EvalStore,
    SessionInput,
    load_criteria,
    run_eval_set,
    session_to_invocations,
    valid_eval_id,
)
from ._loader import AgentLoader, AppLoadError
from ._traces import EventLinks, SpanStore


class DevServer(Protocol):
    """What the dev-UI and eval routes use of the app's server state (``rxllm.web._app``)."""

    loader: AgentLoader
    links: EventLinks
    spans: SpanStore | None

    def check(self, app_name: str, *ids: str) -> None: ...

    def runner(self, app_name: str) -> Runner: ...

    async def session(self, app_name: str, user_id: str, session_id: str) -> Session | None: ...

    def remember(self, event: Event) -> None: ...

_Handler = TypeVar("_Handler", bound=Callable[..., Any])

__all__ = ["add_dev_routes", "add_eval_routes", "app_info", "json_response"]


def json_response(payload: Any, status_code: int = 200) -> Response:
    """A JSON response; rxllm models as their camelCase JSON, ``None`` fields dropped."""
    if isinstance(payload, BaseModel):
        body = payload.model_dump_json(by_alias=True, exclude_none=True)
    elif isinstance(payload, list) and payload and all(isinstance(p, BaseModel) for p in payload):
        body = "[" + ",".join(p.model_dump_json(by_alias=True, exclude_none=True) for p in payload) + "]"
    else:
        body = json.dumps(payload)
    return Response(body, status_code=status_code, media_type="application/json")


def _tool_declarations(agent: BaseAgent) -> list[dict[str, Any]]:
    tools = []
    for tool in getattr(agent, "tools", ()) or ():
        declaration = getattr(tool, "declaration", None)
        found = declaration() if callable(declaration) else None
        if found is not None:
            tools.append({"functionDeclarations": [found.model_dump(mode="json", by_alias=True, exclude_none=True)]})
    return tools


def app_info(name: str, root: BaseAgent, *, with_agents: bool = True) -> dict[str, Any]:
    """ADK's ``AppInfo``: the app's name, root agent, description, language and (with_agents) its agents."""
    info: dict[str, Any] = {"name": name, "rootAgentName": root.name, "description": root.description,
                            "language": "python", "isComputerUse": False}
    if with_agents:
        agents: dict[str, Any] = {}

        def visit(agent: BaseAgent) -> None:
            if agent.name in agents:
                return
            instruction = getattr(agent, "instruction", "")
            agents[agent.name] = {
                "name": agent.name, "description": agent.description,
                "instruction": instruction if isinstance(instruction, str) else
                f"<InstructionProvider: {getattr(instruction, '__name__', type(instruction).__name__)}>",
                "tools": _tool_declarations(agent),
                "subAgents": [child.name for child in agent.sub_agents],
            }
            for child in agent.sub_agents:
                visit(child)

        visit(root)
        info["agents"] = agents
    return info


def add_dev_routes(app: FastAPI, server: DevServer, *, web: bool) -> None:
    """``/health``, ``/version``, ADK UI's configuration routes, ``app-info`` and the trace routes."""

    @app.get("/health")
    def health() -> Response:
        return json_response({"status": "ok"})

    @app.get("/version")
    def version() -> Response:
        info = sys.version_info
        return json_response({"version": __version__, "language": "python",
                              "language_version": f"{info.major}.{info.minor}.{info.micro}", "server": "rxllm"})

    # ADK's UI asks for the user's usage-statistics consent; rxllm collects none, so it is always off.
    @app.get("/config/telemetry")
    def get_telemetry() -> Response:
        return json_response({"telemetry": False})

    @app.post("/config/telemetry")
    def set_telemetry() -> Response:
        return json_response({"telemetry": False})

    if web:  # before the UI's static mount, which would answer these paths from disk
        @app.get("/dev-ui/assets/config/runtime-config.json")
        def runtime_config() -> Response:
            return Response(json.dumps({"backendUrl": "", "telemetry": False}), media_type="application/json",
                            headers={"Cache-Control": "no-store"})

        @app.get("/dev-ui/config")
        def ui_config() -> Response:
            return json_response({"logo_text": None, "logo_image_url": None})

    @app.get("/apps/{app_name}/app-info")
    def get_app_info(app_name: str) -> Response:
        server.check(app_name)
        try:
            loaded = server.loader.load(app_name)
        except AppLoadError as exc:
            raise HTTPException(status_code=500, detail=str(exc)) from exc
        return json_response(app_info(app_name, loaded.root_agent))

    def event_trace(event_id: str) -> Response:
        link = server.links.get(event_id)
        found = server.spans.event_trace(link) if server.spans is not None and link is not None else None
        if found is None:
            raise HTTPException(status_code=404, detail="Trace not found")
        return json_response(found)

    def session_trace(session_id: str) -> Response:
        return json_response(server.spans.session_spans(session_id, server.links) if server.spans is not None else [])

    @app.get("/debug/trace/{event_id}")
    def get_trace(event_id: str) -> Response:
        return event_trace(event_id)

    @app.get("/debug/trace/session/{session_id}")
    def get_session_trace(session_id: str) -> Response:
        return session_trace(session_id)

    @app.get("/dev/apps/{app_name}/debug/trace/{event_id}")
    def get_dev_trace(app_name: str, event_id: str) -> Response:
        return event_trace(event_id)

    @app.get("/dev/apps/{app_name}/debug/trace/session/{session_id}")
    def get_dev_session_trace(app_name: str, session_id: str) -> Response:
        return session_trace(session_id)


class _CamelModel(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class AddSessionRequest(_CamelModel):
    """ADK's add-session-to-eval-set body."""

    eval_id: str
    session_id: str
    user_id: str


class EvalMetricRequest(_CamelModel):
    """One metric of a run-eval request: its name and threshold (ADK's ``EvalMetric``)."""

    metric_name: str
    threshold: float | None = None


class RunEvalRequest(_CamelModel):
    """ADK's run-eval body: which cases (all when empty) and, optionally, which metrics."""

    eval_ids: list[str] = Field(default_factory=list)
    eval_case_ids: list[str] = Field(default_factory=list)
    eval_metrics: list[EvalMetricRequest] = Field(default_factory=list)


class CreateEvalSetRequest(_CamelModel):
    """ADK's create-eval-set body: ``{"evalSet": {"evalSetId": ..., "evalCases": []}}``."""

    eval_set: dict[str, Any]


async def _body(request: Request, model: type[_CamelModel], required: bool = True) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise HTTPException(status_code=422, detail=[{"loc": ["body"], "msg": "Field required",
                                                          "type": "missing"}])
        return model()
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise HTTPException(status_code=422, detail=json.loads(exc.json(include_url=False))) from exc


def add_eval_routes(app: FastAPI, server: DevServer) -> None:
    """ADK's eval-set routes, each at its 1.x path (``/apps/...``) and its 2.x path (``/dev/apps/...``)."""

    def store(app_name: str) -> EvalStore:
        server.check(app_name)
        return EvalStore(server.loader.agents_dir / app_name)

    def eval_set_of(app_name: str, eval_set_id: str, status: int = 400) -> tuple[EvalStore, EvalSet]:
        kept = store(app_name)
        found = kept.get(eval_set_id)
        if found is None:
            raise HTTPException(status_code=status, detail=f"Eval set `{eval_set_id}` not found.")
        return kept, found

    def routes(method: str, *paths: str) -> Callable[[_Handler], _Handler]:
        def register(handler: _Handler) -> _Handler:
            for prefix in ("", "/dev"):
                for path in paths:
                    app.add_api_route(prefix + path, handler, methods=[method])
            return handler

        return register

    base = "/apps/{app_name}"

    def create(app_name: str, eval_set_id: str) -> EvalSet:
        kept = store(app_name)
        try:
            return kept.create(eval_set_id)
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    @routes("POST", base + "/eval-sets")
    async def create_eval_set(app_name: str, request: Request) -> Response:
        body: CreateEvalSetRequest = await _body(request, CreateEvalSetRequest)
        eval_set_id = body.eval_set.get("evalSetId", body.eval_set.get("eval_set_id"))
        if not isinstance(eval_set_id, str):
            raise HTTPException(status_code=422, detail=[{"loc": ["body", "evalSet", "evalSetId"],
                                                          "msg": "Field required", "type": "missing"}])
        return json_response(create(app_name, eval_set_id))

    @routes("POST", base + "/eval_sets/{eval_set_id}")
    def create_eval_set_legacy(app_name: str, eval_set_id: str) -> Response:
        create(app_name, eval_set_id)
        return json_response(None)

    @routes("GET", base + "/eval_sets")
    def list_eval_sets_legacy(app_name: str) -> Response:
        return json_response(store(app_name).ids())

    @routes("GET", base + "/eval-sets")
    def list_eval_sets(app_name: str) -> Response:
        return json_response({"evalSetIds": store(app_name).ids()})

    @routes("POST", base + "/eval_sets/{eval_set_id}/add_session", base + "/eval-sets/{eval_set_id}/add-session")
    async def add_session(app_name: str, eval_set_id: str, request: Request) -> Response:
        body: AddSessionRequest = await _body(request, AddSessionRequest)
        kept, eval_set = eval_set_of(app_name, eval_set_id, status=404)
        server.check(app_name, body.user_id, body.session_id)
        session: Session | None = await server.session(app_name, body.user_id, body.session_id)
        if session is None:
            raise HTTPException(status_code=404, detail="Session not found")
        if not valid_eval_id(body.eval_id):
            raise HTTPException(status_code=400, detail="Invalid Eval ID. Eval ID should have the "
                                "`^[a-zA-Z0-9_]+$` format")
        if any(case.eval_id == body.eval_id for case in eval_set.eval_cases):
            raise HTTPException(status_code=400, detail=f"Eval id `{body.eval_id}` already exists in "
                                f"`{eval_set_id}` eval set.")
        case = EvalCase(eval_id=body.eval_id, conversation=session_to_invocations(session),
                        session_input=SessionInput(app_name=app_name, user_id=body.user_id, state={}),
                        creation_timestamp=time.time())
        kept.save(eval_set.model_copy(update={"eval_cases": [*eval_set.eval_cases, case]}))
        return json_response(None)

    @routes("GET", base + "/eval_sets/{eval_set_id}/evals")
    def list_evals(app_name: str, eval_set_id: str) -> Response:
        _, eval_set = eval_set_of(app_name, eval_set_id)
        return json_response(sorted(case.eval_id for case in eval_set.eval_cases))

    def case_of(eval_set: EvalSet, eval_case_id: str) -> EvalCase:
        found = next((c for c in eval_set.eval_cases if c.eval_id == eval_case_id), None)
        if found is None:
            raise HTTPException(status_code=404, detail=f"Eval set `{eval_set.eval_set_id}` or Eval "
                                f"`{eval_case_id}` not found.")
        return found

    case_paths = (base + "/eval_sets/{eval_set_id}/evals/{eval_case_id}",
                  base + "/eval-sets/{eval_set_id}/eval-cases/{eval_case_id}")

    @routes("GET", *case_paths)
    def get_eval(app_name: str, eval_set_id: str, eval_case_id: str) -> Response:
        _, eval_set = eval_set_of(app_name, eval_set_id, status=404)
        return json_response(case_of(eval_set, eval_case_id))

    @routes("PUT", *case_paths)
    async def update_eval(app_name: str, eval_set_id: str, eval_case_id: str, request: Request) -> Response:
        raw = await request.body()
        try:
            data = json.loads(raw) if raw.strip() else {}
            if not isinstance(data, dict):
                raise ValueError("an eval case is a JSON object")
            given = data.get("evalId", data.get("eval_id"))
            if given and given != eval_case_id:
                raise HTTPException(status_code=400, detail="Eval id in EvalCase should match the eval id in "
                                    "the API route.")
            updated = EvalCase.model_validate({**data, "eval_id": eval_case_id, "evalId": eval_case_id})
        except (ValueError, ValidationError) as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        kept, eval_set = eval_set_of(app_name, eval_set_id, status=404)
        case_of(eval_set, eval_case_id)
        cases = [updated if c.eval_id == eval_case_id else c for c in eval_set.eval_cases]
        kept.save(eval_set.model_copy(update={"eval_cases": cases}))
        return json_response(None)

    @routes("DELETE", *case_paths)
    def delete_eval(app_name: str, eval_set_id: str, eval_case_id: str) -> Response:
        kept, eval_set = eval_set_of(app_name, eval_set_id, status=404)
        case_of(eval_set, eval_case_id)
        cases = [c for c in eval_set.eval_cases if c.eval_id != eval_case_id]
        kept.save(eval_set.model_copy(update={"eval_cases": cases}))
        return json_response(None)

    async def run(app_name: str, eval_set_id: str, request: Request) -> list[dict[str, Any]]:
        body: RunEvalRequest = await _body(request, RunEvalRequest, required=False)
        kept, eval_set = eval_set_of(app_name, eval_set_id)
        if body.eval_metrics:
            criteria = {m.metric_name: m.threshold if m.threshold is not None else 0.0 for m in body.eval_metrics}
        else:
            criteria = load_criteria(kept.folder / f"{eval_set_id}.evalset.json")
        wanted = set(body.eval_case_ids or body.eval_ids)
        result = await run_eval_set(server.runner(app_name), eval_set, criteria=criteria, eval_ids=wanted or None,
                                    on_event=server.remember)
        kept.save_result(result)
        file = f"{eval_set_id}.evalset.json"
        return [{"evalSetFile": file, **case.model_dump(mode="json", by_alias=True, exclude_none=True)}
                for case in result.eval_case_results]

    @routes("POST", base + "/eval_sets/{eval_set_id}/run_eval")
    async def run_eval_legacy(app_name: str, eval_set_id: str, request: Request) -> Response:
        return json_response(await run(app_name, eval_set_id, request))

    @routes("POST", base + "/eval-sets/{eval_set_id}/run")
    async def run_eval(app_name: str, eval_set_id: str, request: Request) -> Response:
        return json_response({"runEvalResults": await run(app_name, eval_set_id, request)})

    def result_of(app_name: str, eval_result_id: str) -> EvalSetResult:
        found = store(app_name).result(eval_result_id)
        if found is None:
            raise HTTPException(status_code=404, detail=f"Eval set result `{eval_result_id}` not found.")
        return found

    @routes("GET", base + "/eval_results/{eval_result_id}", base + "/eval-results/{eval_result_id}")
    def get_eval_result(app_name: str, eval_result_id: str) -> Response:
        return json_response(result_of(app_name, eval_result_id))

    @routes("GET", base + "/eval_results")
    def list_eval_results_legacy(app_name: str) -> Response:
        return json_response(store(app_name).result_ids())

    @routes("GET", base + "/eval-results")
    def list_eval_results(app_name: str) -> Response:
        return json_response({"evalResultIds": store(app_name).result_ids()})

    @routes("GET", base + "/metrics-info")
    def metrics_info(app_name: str) -> Response:
        store(app_name)
        return json_response({"metricsInfo": METRICS_INFO})

    @routes("GET", base + "/eval_metrics")
    def metrics_info_legacy(app_name: str) -> Response:
        store(app_name)
        return json_response(METRICS_INFO)
