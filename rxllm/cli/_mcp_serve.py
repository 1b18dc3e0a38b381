"""``rxllm mcp-serve module:attr``: serve a module's tools over MCP (stdio or streamable HTTP)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from typing import Any, TextIO

__all__ = ["run_mcp_serve"]


def _load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected module:attr (a list of tools, or one tool), got {target!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current directory, as `python -m` would
    value: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def run_mcp_serve(target: str, *, transport: str, host: str, port: int, path: str, name: str, err: TextIO) -> int:
    """Import ``target`` and serve it; returns the exit code."""
    try:
        tools = _load(target)
    except (ImportError, AttributeError, ValueError) as exc:
        print(f"rxllm mcp-serve: cannot load {target!r}: {exc}", file=err)
        return 2
    from .._core.errors import ConfigurationError

    try:
        from ..mcp import serve
    except ImportError as exc:
        print(f"rxllm mcp-serve needs the mcp extra (pip install 'rxllm[mcp]'): {exc}", file=err)
        return 2
    items: Iterable[Any] = tools if isinstance(tools, list | tuple) else [tools]
    try:
        serve(items, transport, name=name, host=host, port=port, path=path)  # type: ignore[arg-type]
    except ConfigurationError as exc:
        print(f"rxllm mcp-serve: {exc}", file=err)
        return 2
    return 0
