"""The documentation: every ```python block of every page runs, and the site builds with no warning.

Each page's Python blocks run in order in one namespace (a page reads like one script); a failure
names the page, the block number and the line. Only ```python, ```text and ```sh fences are
allowed, so a block can be non-executable only on purpose. ``mkdocs build --strict`` runs into a
temporary directory and fails on any warning (broken links and anchors included); it needs no
network.

Hidden blocks keep the test scaffolding (a stub server, scripted replies, ``assert``s) out of
what a reader sees while the suite still runs it. A hidden block is a ```python block inside an
HTML comment that opens with ``<!-- hidden``::

    <!-- hidden: the stub server this page's examples talk to
    ```python
    server = StubServer([...]).start()
    ```
    -->

It runs in page order with the visible blocks, in the same namespace; the rendered page (and
GitHub's view of the Markdown) shows nothing of it, which the site-build test checks.
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
HIDDEN_OPEN = "<!-- hidden"
HIDDEN_CLOSE = "-->"


class Block:
    """One fenced code block of a page."""

    def __init__(self, info: str, line: int, code: str, hidden: bool = False) -> None:
        self.info = info
        self.line = line  # 1-based line of the opening fence
        self.code = code
        self.hidden = hidden  # inside a `<!-- hidden ... -->` comment: run, never rendered


def blocks_of(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order.

    Raises:
        AssertionError: on a fence that is never closed.
    """
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    hidden_since: int | None = None  # the line of the open `<!-- hidden` comment
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if hidden_since is None and stripped.startswith(HIDDEN_OPEN):
            assert HIDDEN_CLOSE not in stripped, f"{name}:{i + 1}: a hidden comment holds no block"
            hidden_since = i + 1
            i += 1
            continue
        if hidden_since is not None and stripped == HIDDEN_CLOSE:
            hidden_since = None
            i += 1
            continue
        match = _FENCE.match(lines[i])
        if match is None:
            assert hidden_since is None or not stripped, (
                f"{name}:{i + 1}: only code blocks go inside `{HIDDEN_OPEN}` (line {hidden_since})"
            )
            i += 1
            continue
        fence, indent, info, start = match["fence"], len(match["indent"]), match["info"].strip(), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        assert i < len(lines), f"{name}:{start + 1}: the code fence is never closed"
        code = "\n".join(body) + "\n"
        if hidden_since is not None:
            assert HIDDEN_CLOSE not in code, f"{name}:{start + 1}: `-->` would end the comment"
        out.append(Block(info.split()[0] if info else "", start + 1, code, hidden=hidden_since is not None))
        i += 1
    assert hidden_since is None, f"{name}:{hidden_since}: the hidden comment is never closed"
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
        assert not block.hidden or block.info == "python", (
            f"{_page_id(page)} block {number} (line {block.line}) is hidden but not ```python: it would do nothing"
        )


def test_hidden_blocks_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n<!-- hidden: setup\n```python\nx = 1\n```\n-->\n\n```python\nprint(x)\n```\n")
    assert [(b.hidden, b.code) for b in blocks_of(page)] == [(True, "x = 1\n"), (False, "print(x)\n")]
    page.write_text("<!-- hidden\n```python\nx = 1\n```\n")
    with pytest.raises(AssertionError, match="never closed"):
        blocks_of(page)


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
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    assert (site / "stream-contract.html").is_file()
    for page in PAGES:
        html = (site / _page_id(page)).with_suffix(".html").read_text(encoding="utf-8")
        shown = re.sub(r"<!--.*?-->", "", html, flags=re.DOTALL)
        # Pygments highlighted every visible block at build time; the hidden ones stayed in comments.
        visible = [b for b in blocks_of(page) if not b.hidden]
        if "\n::: " not in page.read_text(encoding="utf-8"):  # API pages: mkdocstrings adds signature blocks
            assert shown.count('<div class="language-') == len(visible), _page_id(page)
        assert not re.search(r"<(script|link)[^>]+(src|href)=\"(https?:)?//", shown), f"{_page_id(page)} loads a URL"
    assert (site / "css" / "pygments.css").is_file()
    assert not (site / "_ext").exists(), "the docs' build extensions are not part of the site"
    api = (site / "reference" / "rxllm.html").read_text(encoding="utf-8")
    assert 'id="rxllm.LlmRequest"' in api and 'id="rxllm.BaseLlm.generate_content"' in api
    assert '<div class="language-pycon highlight' in api, "the docstrings' doctests render as code"
    assert ":class:" not in api and ":func:" not in api, "Sphinx roles render as code"
