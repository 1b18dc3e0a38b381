"""The rooms of rxllm import downward only, no module takes part in an import circle, and only the
transports import the HTTP client library.

The rooms, bottom up (``docs/architecture.md``): ``_core`` → ``_rx``, ``_transports`` →
``_telemetry`` → ``_models`` → ``providers``, ``_tools``, ``operators`` → ``agents``, ``service``
(side by side: neither imports the other) → ``testing``, ``web`` → ``cli`` → the front doors (``rxllm.aio``,
then ``rxllm`` and ``python -m rxllm``). A room may import only rooms of a lower rank; two rooms of
one rank never import each other. Inside ``agents/`` the sub-rooms are ordered the same way.

Every import counts: absolute and relative, at module level, under ``if TYPE_CHECKING:`` and inside
functions. Importing ``a.b.c`` also runs the package ``a.b``, so an import of a module counts as an
import of each package it sits in, except the importer's own packages (those are already running).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rxllm"

ROOM_RANK = {
    "_core": 0,
    "_rx": 1,
    "_transports": 1,
    "_telemetry": 2,
    "_models": 3,
    "providers": 4,
    "_tools": 4,
    "operators": 4,
    "agents": 5,
    "service": 5,
    "testing": 6,
    "mcp": 6,  # rxllm.mcp: the front door of serving tools over MCP (rxllm/_tools/_mcp/_serve.py)
    "web": 6,
    "cli": 7,
    "aio": 8,  # the asyncio front door (rxllm.aio)
    "__init__": 9,  # the front door (rxllm)
    "__main__": 9,  # python -m rxllm
}

AGENTS_ROOM_RANK = {
    "_sessions": 0,
    "_artifacts": 1,
    "_memory": 1,
    "_invocation": 2,
    "_flows": 3,
    "_agents": 4,
    "_runners": 5,
    "__init__": 6,  # the front door (rxllm.agents)
}

HTTP_LIBRARIES = {"httpx", "httpcore", "httpx2", "httpcore2", "wsproto"}

Graph = Mapping[str, Mapping[str, int]]
"""Module name → {imported module name: the line of the first import of it}."""


# -- the import graph -----------------------------------------------------------------------------


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name (a package by its own name)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = (package, *path.relative_to(root).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _packages_of(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _imports_of(name: str, path: Path, modules: Mapping[str, Path], package: str) -> dict[str, int]:
    """The package's modules that ``name`` imports, each with the line of its first import."""
    own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    running = _packages_of(name)  # already being imported when this module runs
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target and target not in modules:  # ``from x.y import Name``: the module is x.y
            target = target.rpartition(".")[0]
        if not target or target == name:
            return
        found.setdefault(target, line)
        for enclosing in _packages_of(target) - running - {name}:
            found.setdefault(enclosing, line)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package:
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = own_package.split(".")[: len(own_package.split(".")) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == package:
                base = node.module
            else:
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:  # ``from . import sibling``: the sibling module
                    add(submodule, node.lineno)
                    if base not in running:
                        add(base, node.lineno)
                else:
                    add(base, node.lineno)
    return found


def import_graph(root: Path, package: str) -> dict[str, dict[str, int]]:
    """The module-level import graph of the package at ``root`` (see the module docstring)."""
    modules = module_names(root, package)
    return {name: _imports_of(name, path, modules, package) for name, path in modules.items()}


def tangles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` that hold a circle, each sorted. Iterative Tarjan."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(sorted(component))
    return components


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One circle per tangle (``tangles``), as a path that starts and ends at the tangle's smallest
    node, e.g. ``["a", "b", "a"]``."""
    return [_circle_through(graph, component) for component in tangles(graph)]


def _circle_through(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """A shortest path from the component's smallest node back to itself, inside the component."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child == start:
                    return [*paths[node], start]
                if child in members and child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle through {component}")  # a strongly connected component always has one


GRAPH = import_graph(PACKAGE, "rxllm")


def _room(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _agents_room(name: str) -> str:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def _location(name: str) -> str:
    path = module_names(PACKAGE, "rxllm")[name]
    return str(path.relative_to(PACKAGE.parent))


# -- the rules ------------------------------------------------------------------------------------


def test_every_room_has_a_rank() -> None:
    assert {_room(name) for name in GRAPH} == set(ROOM_RANK)
    assert {_agents_room(name) for name in GRAPH if _room(name) == "agents"} == set(AGENTS_ROOM_RANK)


def test_the_graph_sees_the_imports_that_make_the_layers() -> None:
    # the graph is what every rule below stands on: a graph without edges would pass them all
    assert GRAPH["rxllm._models.base_llm"].keys() >= {"rxllm._core.types", "rxllm._core"}
    assert "rxllm._tools._services" in GRAPH["rxllm._tools._context"]  # relative, at module level
    assert "rxllm.providers.openai" in GRAPH["rxllm.agents._agents.registry"]  # inside a function
    assert "rxllm.agents._artifacts.service" in GRAPH["rxllm.agents._invocation.base"]  # under TYPE_CHECKING


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_rooms_import_only_lower_rooms(name: str) -> None:
    room = _room(name)
    wrong = [
        f"{target} (room {_room(target)}, rank {ROOM_RANK[_room(target)]}) at line {line}"
        for target, line in sorted(GRAPH[name].items())
        if _room(target) != room and ROOM_RANK[_room(target)] >= ROOM_RANK[room]
    ]
    assert not wrong, f"{_location(name)} (room {room}, rank {ROOM_RANK[room]}) imports " + "; ".join(wrong)


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if _room(n) == "agents"))
def test_the_rooms_of_the_agent_runtime_import_downward(name: str) -> None:
    room = _agents_room(name)
    wrong = [
        f"{target} (agents/{_agents_room(target)}) at line {line}"
        for target, line in sorted(GRAPH[name].items())
        if _room(target) == "agents"
        and _agents_room(target) != room
        and AGENTS_ROOM_RANK[_agents_room(target)] >= AGENTS_ROOM_RANK[room]
    ]
    assert not wrong, f"{_location(name)} (agents/{room}) imports " + "; ".join(wrong)


def test_the_core_imports_nothing_else_of_rxllm() -> None:
    outside = {
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if _room(name) == "_core"
        for target in targets
        if _room(target) != "_core"
    }
    assert not outside


def test_the_two_runtimes_never_import_each_other() -> None:
    # Both stand on the tool layer (``rxllm._tools``); an arrow either way between them is a mistake.
    crossing = {
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if {_room(name), _room(target)} == {"agents", "service"}
    }
    assert not crossing


def test_the_runtimes_share_one_tool_layer() -> None:
    importers = {_room(name) for name, targets in GRAPH.items() if any(_room(t) == "_tools" for t in targets)}
    assert {"agents", "service"} <= importers


def test_no_module_takes_part_in_an_import_circle() -> None:
    found = [
        f"{' → '.join(_circle_through(GRAPH, tangle))} (the circles tie {len(tangle)} modules: {', '.join(tangle)})"
        for tangle in tangles(GRAPH)
    ]
    assert not found, "import circles:\n" + "\n".join(found)


def test_only_the_transports_import_the_http_client_library() -> None:
    importers: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for library in {n.split(".")[0] for n in names} & HTTP_LIBRARIES:
                importers[str(path.relative_to(PACKAGE))] = library
    assert importers, "no module imports an HTTP client library: the check looks at the wrong names"
    outside = {path: library for path, library in importers.items() if not path.startswith("_transports/")}
    assert not outside


# -- the checker itself ---------------------------------------------------------------------------


def test_find_cycles_reports_each_circle_as_a_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d", "f"}, "f": {"e"}, "g": {"g"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"], ["g", "g"]]
    assert tangles({**graph, "d": {"b"}}) == [["a", "b", "c", "d"], ["e", "f"], ["g"]]


def test_find_cycles_finds_none_in_a_layered_graph() -> None:
    diamond = {"top": {"left", "right"}, "left": {"bottom"}, "right": {"bottom"}, "bottom": set()}
    assert find_cycles(diamond) == []


def test_find_cycles_handles_a_chain_deeper_than_the_recursion_limit() -> None:
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)}
    assert find_cycles(chain) == []
    assert find_cycles({**chain, "m5000": {"m0"}})[0][:2] == ["m0", "m1"]


def _write(root: Path, files: Mapping[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_circle_made_of_type_checking_and_function_level_imports_is_caught(tmp_path: Path) -> None:
    _write(
        tmp_path / "pkg",
        {
            "__init__.py": "",
            "agent.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .flow import Flow\n",
            "flow.py": "def run():\n    from pkg.agent import Agent\n",
            "alone.py": "import pkg.agent\n",
        },
    )
    graph = import_graph(tmp_path / "pkg", "pkg")
    assert graph["pkg.alone"] == {"pkg.agent": 1}
    assert find_cycles(graph) == [["pkg.agent", "pkg.flow", "pkg.agent"]]


def test_importing_a_module_of_another_package_runs_that_package(tmp_path: Path) -> None:
    # lower/helper.py looks harmless, but ``from ..lower.helper`` runs lower/__init__.py, which imports upper
    _write(
        tmp_path / "pkg",
        {
            "__init__.py": "",
            "lower/__init__.py": "from ..upper.agent import Agent\n",
            "lower/helper.py": "",
            "upper/__init__.py": "",
            "upper/agent.py": "from ..lower.helper import helper\nfrom . import sibling\n",
            "upper/sibling.py": "",
        },
    )
    graph = import_graph(tmp_path / "pkg", "pkg")
    assert graph["pkg.upper.agent"] == {"pkg.lower.helper": 1, "pkg.lower": 1, "pkg.upper.sibling": 2}
    assert find_cycles(graph) == [["pkg.lower", "pkg.upper.agent", "pkg.lower"]]


def test_rxllm_never_imports_legacy_httpx_unless_given_a_legacy_client() -> None:
    import subprocess
    import sys

    script = (
        "import sys, rxllm\n"
        "from rxllm.providers.openai import OpenAiChatModel\n"
        "from rxllm import AsyncHttpTransport, HttpTransport\n"
        "OpenAiChatModel('m', base_url='http://127.0.0.1:1/v1', api_key='k', transport=HttpTransport()).provider\n"
        "AsyncHttpTransport().close()\n"
        "print(sorted(m for m in ('httpx', 'httpcore') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
