"""The layers import downward only, and httpx stays inside the two transport modules.

Layers, bottom up (ARCHITECTURE.md §1): errors/types/json → sse/chunk/provider protocols →
aggregation → transports/retry → models and providers → the tool layer (``_tools``) and the Rx
operators (``operators``) → the two runtimes, agents and service, side by side (neither imports
the other) → testing → cli.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rxllm"

LAYER = {
    "_core": 0,
    "_rx": 1,
    "_transports": 1,
    "_telemetry": 2,
    "aio": 2,
    "_models": 3,
    "providers": 4,
    "_tools": 4,
    "operators": 4,
    "agents": 5,
    "service": 5,
    "testing": 6,
    "cli": 7,
    "__init__": 8,
    "__main__": 8,
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _layer_of(path: Path) -> tuple[str, int]:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    key = parts[0]
    return key, LAYER[key]


def _rxllm_imports(path: Path) -> list[str]:
    """The rxllm layers a module imports (first component below the package)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0 for rxllm/x.py, 1 for rxllm/pkg/x.py
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: climb to the package root, then take the first component
                up = node.level - 1
                if up < depth:  # a sibling inside the same sub-package: same layer
                    continue
                target = (node.module or "").split(".")[0]
                found += [target] if target else [alias.name for alias in node.names]
            elif node.module and node.module.split(".")[0] == "rxllm":
                rest = node.module.split(".")[1:]
                found += [rest[0]] if rest else [alias.name for alias in node.names]
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_downward(path: Path) -> None:
    name, layer = _layer_of(path)
    for target in _rxllm_imports(path):
        if target not in LAYER:
            continue  # a name re-exported by rxllm/__init__ (only the CLI and testing may do that)
        assert LAYER[target] <= layer, f"{name} (layer {layer}) imports {target} (layer {LAYER[target]})"


def test_httpx2_and_httpx_are_imported_only_by_the_transports() -> None:
    importers = set()
    for path in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            )
            if any(n.split(".")[0] in ("httpx", "httpcore", "httpx2", "httpcore2") for n in names):
                importers.add(str(path.relative_to(PACKAGE)))
    assert importers, "the transports import the HTTP client library"
    assert {path for path in importers if not path.startswith("_transports/")} == set()


RUNTIMES = ("agents", "service")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_two_runtimes_never_import_each_other(path: Path) -> None:
    # Both stand on the tool layer (``rxllm._tools``); an arrow either way between them is a mistake.
    name, _ = _layer_of(path)
    if name not in RUNTIMES:
        return
    other = next(runtime for runtime in RUNTIMES if runtime != name)
    assert other not in _rxllm_imports(path), f"{path.relative_to(PACKAGE)} imports rxllm.{other}"


def test_the_runtimes_share_one_tool_layer() -> None:
    importers = {_layer_of(path)[0] for path in _modules() if "_tools" in _rxllm_imports(path)}
    assert {"agents", "service"} <= importers


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
