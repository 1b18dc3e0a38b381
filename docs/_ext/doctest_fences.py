"""A griffe extension for the API reference: docstrings written for the REPL and for Sphinx read well.

* The docstrings hold plain doctests (``>>>`` lines and their output, run by the test suite), which
  Markdown would otherwise read as block quotes and ``[...]`` reference links. Each run of doctest
  lines, up to the blank line that ends a doctest's expected output, is wrapped in a
  ```` ```pycon ```` fence.
* Sphinx roles (``:class:`~rxllm.HttpTransport```) become inline code (```HttpTransport```), the
  name shortened where the role says ``~``.

The source docstrings stay as they are. Loaded by mkdocs.yml
(``extensions: [docs/_ext/doctest_fences.py]``); excluded from the site.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["DoctestFences", "fence_doctests", "unrole"]

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|type):`(?P<tilde>~?)(?P<target>[^`]+)`")


def unrole(text: str) -> str:
    """``text`` with each Sphinx cross-reference role turned into inline code."""

    def code(match: re.Match[str]) -> str:
        target = match["target"]
        return f"`{target.rsplit('.', 1)[-1] if match['tilde'] else target}`"

    return _ROLE.sub(code, text)


def fence_doctests(text: str) -> str:
    """``text`` with every run of doctest lines fenced as ``pycon`` (existing fences left alone)."""
    out: list[str] = []
    lines = text.splitlines()
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        if in_fence or not (stripped == ">>>" or stripped.startswith(">>> ")):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the doctests and unroles the roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = unrole(fence_doctests(obj.docstring.value))
