"""The documentation: every ```python block of every page runs, and the site builds with no warning.

Each page's Python blocks run in order in one namespace (a page reads like one script); a failure
names the page, the block number and the line. Only ```python, ```text and ```sh fences are
allowed, so a block can be non-executable only on purpose. ``mkdocs build --strict`` runs into a
temporary directory and fails on any warning (broken links and anchors included); it needs no
network.
"""

from __future__ import annotations

import linecache
import re
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
ALLOWED_FENCES = {"python", "text", "sh"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^`\n]*)$")


class Block:
    """One fenced code block of a page."""

    def __init__(self, info: str, line: int, code: str) -> None:
        self.info = info
        self.line = line  # 1-based line of the opening fence
        self.code = code


def blocks_of(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order.

    Raises:
        AssertionError: on a fence that is never closed.
    """
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, indent, info, start = match["fence"], len(match["indent"]), match["info"].strip(), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        assert i < len(lines), f"{page.relative_to(ROOT)}:{start + 1}: the code fence is never closed"
        out.append(Block(info.split()[0] if info else "", start + 1, "\n".join(body) + "\n"))
        i += 1
    return out


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def _close_leftovers(namespace: dict[str, Any]) -> None:
    """Close servers and transports a failed page left open (a passing page closes its own)."""
    from rxllm import HttpTransport
    from rxllm.testing import StubServer

    for value in namespace.values():
        if isinstance(value, StubServer | HttpTransport):
            value.close()


def test_there_are_pages() -> None:
    names = {_page_id(p) for p in PAGES}
    assert {"index.md", "getting-started.md", "stream-contract.md", "benchmarks.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_only_known_fences(page: Path) -> None:
    for number, block in enumerate(blocks_of(page), 1):
        assert block.info in ALLOWED_FENCES, (
            f"{_page_id(page)} block {number} (line {block.line}) is fenced as {block.info!r}: use ```python "
            f"(executed by this test), or ```text / ```sh for a block that must not run"
        )


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_python_blocks_run(page: Path) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs.{_page_id(page)}"}
    try:
        for number, block in enumerate(blocks_of(page), 1):
            if block.info != "python":
                continue
            filename = f"docs/{_page_id(page)}, block {number} (line {block.line})"
            # Registered so the traceback shows the failing line of the block.
            linecache.cache[filename] = (len(block.code), None, block.code.splitlines(True), filename)
            failure = None
            try:
                # dont_inherit: run as a user's script would, without this module's `from __future__`
                # (inherited string annotations left a page's nested pydantic models undefined)
                exec(compile(block.code, filename, "exec", dont_inherit=True), namespace)
            except BaseException:  # AssertionError included: name the page and block either way
                failure = traceback.format_exc()
            if failure is not None:
                pytest.fail(f"{filename} failed:\n{failure}", pytrace=False)
    finally:
        _close_leftovers(namespace)


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [_page_id(p) for p in PAGES if f": {_page_id(p)}" not in config]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


def test_the_site_builds_without_warnings(tmp_path: Path) -> None:
    import importlib.util

    assert importlib.util.find_spec("mkdocs") is not None, (
        "mkdocs is in the dev dependency group: make .venv/.installed (pip install --group dev)"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "stream-contract.html").is_file()
