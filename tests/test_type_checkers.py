"""What a user's type checker says about rxllm.

* ``pyright --verifytypes rxllm --ignoreexternal`` scores at least 95 % (every public symbol's type
  known to a checker).
* The code users copy -- every page's ```python blocks (one file per page, as the page runs) and
  the README's, and ``examples/`` -- passes ``mypy --strict`` **without** the pydantic plugin (what
  a user has by default) and ``pyright --strict``.

The checkers run on this checkout (``PYTHONPATH`` / ``extraPaths`` point at it), in a temporary
directory, with their own config, so the repository's mypy settings (plugin included) do not apply.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs import PAGES, blocks_of

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCORE_GATE = 0.95
TIMEOUT = 300


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is in the dev dependency group: make .venv/.installed (pip install --group dev)"
    return str(path)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # pyright --verifytypes resolves packages through the `python` on PATH (it ignores --pythonpath):
    # put this interpreter's directory first, or reactivex's classes read as "unknown" bases.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=cwd, env=env)


def user_code(into: Path) -> list[Path]:
    """Write the docs' and README's python blocks, one module per page, into ``into``."""
    written = []
    for page in [*PAGES, ROOT / "README.md"]:
        code = [block.code for block in blocks_of(page) if block.info == "python"]
        if not code:
            continue
        stem = str(page.relative_to(ROOT).with_suffix("")).replace("/", "_").replace("-", "_")
        path = into / f"{stem}.py"
        path.write_text("\n".join(code), encoding="utf-8")
        written.append(path)
    return written


def _examples() -> list[Path]:
    return sorted((ROOT / "examples").glob("*.py"))


@pytest.fixture(scope="module")
def checked_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("user_code")
    assert user_code(directory), "no python blocks found in the docs"
    return directory


def test_verifytypes_score(tmp_path: Path) -> None:
    result = _run([_tool("pyright"), "--pythonpath", sys.executable, "--outputjson",
                   "--verifytypes", "rxllm", "--ignoreexternal"], cwd=tmp_path)
    report = json.loads(result.stdout)
    score = report["typeCompleteness"]["completenessScore"]
    problems = [(symbol["name"], diagnostic["message"]) for symbol in report["typeCompleteness"]["symbols"]
                for diagnostic in symbol.get("diagnostics", []) if diagnostic["severity"] == "error"][:20]
    assert score >= SCORE_GATE, f"verifytypes: {score:.1%} < {SCORE_GATE:.0%}; first problems: {problems}"


def test_docs_and_examples_pass_mypy_strict_without_the_pydantic_plugin(checked_dir: Path) -> None:
    config = checked_dir / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\npython_version = 3.11\n", encoding="utf-8")
    result = _run([_tool("mypy"), "--config-file", str(config), "--cache-dir", str(checked_dir / ".mypy_cache"),
                   "--python-executable", sys.executable, ".", *map(str, _examples())], cwd=checked_dir)
    assert result.returncode == 0, f"mypy --strict (no plugin) on the docs' code and examples/:\n{result.stdout}"


def test_docs_and_examples_pass_pyright_strict(checked_dir: Path) -> None:
    config = {"typeCheckingMode": "strict", "pythonVersion": "3.11", "extraPaths": [str(ROOT)],
              "include": [".", *map(str, _examples())]}
    (checked_dir / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    result = _run([_tool("pyright"), "--pythonpath", sys.executable, "--project", str(checked_dir)], cwd=checked_dir)
    assert result.returncode == 0, f"pyright --strict on the docs' code and examples/:\n{result.stdout}"


# -- what a checker infers: typed structured output, pipe, short prompts ----------------------------

TYPED_OK = '''
from typing import assert_type

from pydantic import BaseModel
from reactivex import operators as ops

import rxllm
from rxllm import (BaseLlm, Content, GenerateContentConfig, LlmRequest, LlmResponse, ModelStreamEvent, Part,
                   ResponseStream)
from rxllm.agents import InMemoryRunner, LlmAgent
from rxllm.aio import AwaitableObservable
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService, AiServiceStreamingEvent, FinalResponseEvent
from rxllm.testing import ScriptedLlm


class City(BaseModel):
    name: str


def text_of(response: LlmResponse) -> str:
    return response.text()


async def main(
    model: OpenAiChatModel, request: LlmRequest, service: AiService, scripted: ScriptedLlm, any_model: BaseLlm
) -> City:
    final = await model.generate_content(request, stream=True)
    city = final.parsed_as(City)
    assert_type(city, City)
    assert_type(final.parsed_as(list[City]), list[City])
    texts = model.generate_content(request, stream=True).pipe(ops.map(text_of))
    assert_type(texts, AwaitableObservable[str])
    assert_type(await texts, str)
    async for text in texts:
        assert_type(text, str)
    event = await service.stream("Where is order A17?")
    assert_type(event, AiServiceStreamingEvent)
    if isinstance(event, FinalResponseEvent):
        assert_type(event.response.parsed_as(City), City)
    stream = model.stream("Biggest city of France?", config=GenerateContentConfig(response_schema=City))
    for partial in stream:
        assert_type(partial, LlmResponse)
    for item in rxllm.iterate(texts):
        assert_type(item, str)
    # short prompts where a request is taken: a str, a conversation (a list of Content)
    hi = await model.generate_content("Hi")
    assert_type(hi, LlmResponse)
    assert_type(model.generate_content([Content(role="user", parts=[Part.from_text("Hi")])], stream=True),
                AwaitableObservable[LlmResponse])
    assert_type(model.stream_events("Hi"), AwaitableObservable[ModelStreamEvent])
    assert_type(scripted.generate_content("Hi"), AwaitableObservable[LlmResponse])
    assert_type(any_model.stream_events("Hi"), AwaitableObservable[ModelStreamEvent])
    assert_type(any_model.stream("Hi"), ResponseStream)
    last_event = await InMemoryRunner(LlmAgent("geo", model, output_schema=City)).run_async("u1", "s1", "Hi")
    assert_type(last_event.parsed_as(City), City)
    return city if stream.final is None else stream.final.parsed_as(City)
'''

TYPED_BAD = '''
from pydantic import BaseModel

from rxllm import LlmResponse


class City(BaseModel):
    name: str


def wrong(final: LlmResponse) -> None:
    count: int = final.parsed_as(City)  # a City is not an int
    print(count)
'''


def _check_both(directory: Path, name: str, code: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    directory.mkdir()
    (directory / f"{name}.py").write_text(code, encoding="utf-8")
    config = directory / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\npython_version = 3.11\n", encoding="utf-8")
    mypy = _run([_tool("mypy"), "--config-file", str(config), "--cache-dir", str(directory / ".mypy_cache"),
                 "--python-executable", sys.executable, f"{name}.py"], cwd=directory)
    settings = {"typeCheckingMode": "strict", "pythonVersion": "3.11", "extraPaths": [str(ROOT)], "include": ["."]}
    (directory / "pyrightconfig.json").write_text(json.dumps(settings), encoding="utf-8")
    pyright = _run([_tool("pyright"), "--pythonpath", sys.executable, "--project", str(directory)], cwd=directory)
    return mypy, pyright


def test_checkers_see_the_parsed_type_the_pipe_result_and_short_prompts(tmp_path: Path) -> None:
    mypy, pyright = _check_both(tmp_path / "ok", "typed_ok", TYPED_OK)
    assert mypy.returncode == 0, f"mypy --strict:\n{mypy.stdout}"
    assert pyright.returncode == 0, f"pyright --strict:\n{pyright.stdout}"


def test_checkers_reject_a_parsed_object_assigned_to_the_wrong_type(tmp_path: Path) -> None:
    mypy, pyright = _check_both(tmp_path / "bad", "typed_bad", TYPED_BAD)
    assert mypy.returncode != 0 and 'Incompatible types in assignment (expression has type "City"' in mypy.stdout, (
        mypy.stdout
    )
    assert pyright.returncode != 0 and '"City" is not assignable to "int"' in pyright.stdout, pyright.stdout
