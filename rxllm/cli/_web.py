"""``rxllm api-server``, ``rxllm web`` and ``rxllm eval``: ADK's ``adk api_server``, ``adk web`` and ``adk eval``."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .._core.errors import RxLlmError

if TYPE_CHECKING:
    from ..web._eval import EvalMetricResult

__all__ = ["add_eval_parser", "add_server_parsers", "run_eval", "run_server"]


def add_server_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``api-server`` and ``web``."""
    for name, help_text in (
        ("api-server", "serve the apps of an agents folder over ADK's development-server API"),
        ("web", "the same API plus a browser UI at /dev-ui/"),
    ):
        parser = commands.add_parser(name, help=help_text, description=help_text + (
            ". Binds 127.0.0.1 unless --host says otherwise: the API runs the agents' tools and reads "
            "every session and artifact, with no authentication."))
        parser.add_argument("agents_dir", metavar="AGENTS_DIR", help="a folder with one app per package or module")
        parser.add_argument("--host", default="127.0.0.1",
                            help="the address to bind (default: 127.0.0.1; 0.0.0.0 exposes the API to the network)")
        parser.add_argument("--port", type=int, default=8000, help="the port (default: 8000)")
        parser.add_argument("--session-service-uri", metavar="URI",
                            help="sqlite:///sessions.db or postgresql://user@host/db (default: in memory)")
        parser.add_argument("--artifact-service-uri", metavar="URI",
                            help="file:///path/to/folder (default: in memory)")
        parser.add_argument("--reload", action="store_true", help="re-import an app when its files change")
        parser.add_argument("--allow-origin", action="append", dest="allow_origins", metavar="ORIGIN",
                            help="a browser origin allowed to call the API (CORS); repeatable")
        parser.add_argument("--no-trace", action="store_true",
                            help="do not keep OpenTelemetry spans for /debug/trace")
        parser.add_argument("--log-level", default="info", help="uvicorn's log level (default: info)")
        if name == "web":
            parser.add_argument("--ui", metavar="PATH", help="serve this built UI folder instead of rxllm's "
                                "(e.g. ADK's google/adk/cli/browser)")


def add_eval_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``eval``."""
    parser = commands.add_parser("eval", help="run an ADK eval set against an app; exit 1 when a case fails")
    parser.add_argument("app_path", metavar="AGENTS_DIR/APP", help="the app: its folder or module in an agents folder")
    parser.add_argument("eval_sets", nargs="+", metavar="EVALSET.json", help="ADK eval set files")
    parser.add_argument("--config", metavar="FILE", help="a test_config.json with criteria (default: the one "
                        "beside each eval set, else tool_trajectory_avg_score 1.0, response_match_score 0.8)")
    parser.add_argument("--result", metavar="FILE.json", help="where to write the results (default: "
                        "APP/.adk/eval_history/<result id>.evalset_result.json)")
    parser.add_argument("--session-service-uri", metavar="URI", help="where the eval sessions are kept")


def _app_of(app_path: str) -> tuple[Path, str]:
    path = Path(app_path)
    name = path.stem if path.suffix == ".py" else path.name
    return path.resolve().parent, name


def run_server(args: argparse.Namespace, err: TextIO) -> int:
    """Serve ``create_app(...)`` with uvicorn until interrupted."""
    try:
        import uvicorn

        from ..web import create_app
    except ImportError as exc:
        print(f"rxllm {args.command}: needs the web extra: pip install 'rxllm[web]' ({exc})", file=err)
        return 2
    if not Path(args.agents_dir).is_dir():
        print(f"rxllm {args.command}: {args.agents_dir} is not a folder", file=err)
        return 2
    trace = not args.no_trace
    if trace:
        try:
            import opentelemetry.sdk.trace  # noqa: F401
        except ImportError:
            trace = False
    try:
        app = create_app(
            args.agents_dir,
            session_service_uri=args.session_service_uri,
            artifact_service_uri=args.artifact_service_uri,
            web=args.command == "web",
            ui_dir=getattr(args, "ui", None),
            reload=args.reload,
            trace=trace,
            allow_origins=args.allow_origins,
        )
    except RxLlmError as exc:
        print(f"rxllm {args.command}: {exc}", file=err)
        return 2
    where = f"http://{args.host}:{args.port}" + ("/dev-ui/" if args.command == "web" else "")
    print(f"rxllm {args.command}: serving {Path(args.agents_dir).resolve()} on {where}", file=err)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"rxllm {args.command}: bound to {args.host}: anyone who can reach it can run the agents "
              "and read every session", file=err)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_eval(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run each eval set against the app; print a table; write the results; 1 when a case failed."""
    from ..agents import Runner
    from ..web import AgentLoader, AppLoadError, EvalStatus, load_criteria, load_eval_set, run_eval_set
    from ..web._services import close_service, session_service_from_uri

    agents_dir, name = _app_of(args.app_path)
    loader = AgentLoader(agents_dir)
    try:
        loaded = loader.load(name)
        sessions = session_service_from_uri(args.session_service_uri)
    except (AppLoadError, RxLlmError) as exc:
        print(f"rxllm eval: {exc}", file=err)
        return 2
    runner = Runner(loaded.root_agent, name, sessions, plugins=loaded.plugins)
    rows = [["eval set", "case", "status", "tool_trajectory_avg_score", "response_match_score"]]
    failed = False
    written: list[str] = []
    try:
        for eval_set_file in args.eval_sets:
            try:
                eval_set = load_eval_set(eval_set_file)
                criteria = load_criteria(eval_set_file, args.config)
            except RxLlmError as exc:
                print(f"rxllm eval: {exc}", file=err)
                return 2
            result = asyncio.run(run_eval_set(runner, eval_set, criteria=criteria))
            for case in result.eval_case_results:
                scores = {m.metric_name: m for m in case.overall_eval_metric_results}

                def cell(metric: str, scores: Mapping[str, EvalMetricResult] = scores) -> str:
                    found = scores.get(metric)
                    if found is None:
                        return "-"
                    return "n/a" if found.score is None else f"{found.score:.2f} (>= {found.threshold:.2f})"

                status = EvalStatus(case.final_eval_status).name
                if case.error:
                    status += f": {case.error}"
                rows.append([eval_set.eval_set_id, case.eval_id, status,
                             cell("tool_trajectory_avg_score"), cell("response_match_score")])
            failed = failed or not result.passed()
            target = Path(args.result) if args.result else (
                agents_dir / name / ".adk" / "eval_history" / f"{result.eval_set_result_id}.evalset_result.json"
                if (agents_dir / name).is_dir() else Path(f"{result.eval_set_result_id}.evalset_result.json"))
            if args.result and len(args.eval_sets) > 1:
                target = target.with_name(f"{target.stem}.{eval_set.eval_set_id}{target.suffix}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(result.model_dump(mode="json", exclude_none=True), indent=2) + "\n")
            written.append(str(target))
    finally:
        close_service(sessions)
    print(_table(rows), file=out)
    for path in written:
        print(f"results: {path}", file=out)
    print("eval: FAILED" if failed else "eval: PASSED", file=out)
    return 1 if failed else 0
