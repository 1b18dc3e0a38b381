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
import re
import subprocess
import sys
from dataclasses import dataclass
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


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    # pyright --verifytypes resolves packages through the `python` on PATH (it ignores --pythonpath):
    # put this interpreter's directory first, or reactivex's classes read as "unknown" bases.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)


def _finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return _finish(_start(args, cwd))


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


@dataclass(frozen=True)
class Checked:
    """One ``mypy --strict`` run and one ``pyright --strict`` run (side by side) over the docs' code,
    ``examples/`` and the two typing probes below; each test reads its files' diagnostics."""

    directory: Path
    mypy: subprocess.CompletedProcess[str]
    pyright: subprocess.CompletedProcess[str]

    def mypy_lines(self, name: str) -> list[str]:
        return [line for line in self.mypy.stdout.splitlines() if line.startswith(f"{name}:")]

    def pyright_lines(self, name: str) -> list[str]:
        return [line for line in self.pyright.stdout.splitlines() if f"{os.sep}{name}:" in line]


PROBES = {"typed_ok.py", "typed_bad.py"}


ERROR_LINE = re.compile(r"^\s*(?P<file>\S+?):\d+(:\d+)?(: | - )error")  # mypy's and pyright's error lines


# each checker's own count of its errors ("Found 1 error in 1 file", "1 error, 0 warnings, ...")
ERROR_TOTAL = re.compile(r"^(?:Found )?(?P<count>\d+) errors?(?: in |, )", re.MULTILINE)


def _errors_outside_probes(output: str) -> list[str]:
    lines = [line for line in output.splitlines() if ERROR_LINE.match(line)]
    total = ERROR_TOTAL.search(output)
    # every error the checker counted is one line read here: none hides from the filter below
    assert total is not None and int(total["count"]) == len(lines), output
    return [line for line in lines if (match := ERROR_LINE.match(line)) and Path(match["file"]).name not in PROBES]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    directory = tmp_path_factory.mktemp("user_code")
    assert user_code(directory), "no python blocks found in the docs"
    (directory / "typed_ok.py").write_text(TYPED_OK, encoding="utf-8")
    (directory / "typed_bad.py").write_text(TYPED_BAD, encoding="utf-8")
    config = directory / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\npython_version = 3.11\n", encoding="utf-8")
    settings = {"typeCheckingMode": "strict", "pythonVersion": "3.11", "extraPaths": [str(ROOT)],
                "include": [".", *map(str, _examples())]}
    (directory / "pyrightconfig.json").write_text(json.dumps(settings), encoding="utf-8")
    # the two checkers run at once (one core each); the docs' modules share one mypy process and cache
    mypy = _start([_tool("mypy"), "--config-file", str(config), "--cache-dir", str(directory / ".mypy_cache"),
                   "--python-executable", sys.executable, ".", *map(str, _examples())], cwd=directory)
    pyright = _start([_tool("pyright"), "--pythonpath", sys.executable, "--project", str(directory)], cwd=directory)
    return Checked(directory, _finish(mypy), _finish(pyright))


def test_verifytypes_score(tmp_path: Path) -> None:
    result = _run([_tool("pyright"), "--pythonpath", sys.executable, "--outputjson",
                   "--verifytypes", "rxllm", "--ignoreexternal"], cwd=tmp_path)
    report = json.loads(result.stdout)
    score = report["typeCompleteness"]["completenessScore"]
    problems = [(symbol["name"], diagnostic["message"]) for symbol in report["typeCompleteness"]["symbols"]
                for diagnostic in symbol.get("diagnostics", []) if diagnostic["severity"] == "error"][:20]
    assert score >= SCORE_GATE, f"verifytypes: {score:.1%} < {SCORE_GATE:.0%}; first problems: {problems}"


def test_docs_and_examples_pass_mypy_strict_without_the_pydantic_plugin(checked: Checked) -> None:
    errors = _errors_outside_probes(checked.mypy.stdout)
    assert not errors, "mypy --strict (no plugin) on the docs' code and examples/:\n" + "\n".join(errors)
    assert checked.mypy.returncode in (0, 1), checked.mypy.stdout + checked.mypy.stderr  # 2: mypy itself failed


def test_docs_and_examples_pass_pyright_strict(checked: Checked) -> None:
    errors = _errors_outside_probes(checked.pyright.stdout)
    assert not errors, "pyright --strict on the docs' code and examples/:\n" + "\n".join(errors)
    assert checked.pyright.returncode in (0, 1), checked.pyright.stdout + checked.pyright.stderr


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


def test_checkers_see_the_parsed_type_the_pipe_result_and_short_prompts(checked: Checked) -> None:
    assert not checked.mypy_lines("typed_ok.py"), "mypy --strict:\n" + "\n".join(checked.mypy_lines("typed_ok.py"))
    assert not checked.pyright_lines("typed_ok.py"), "pyright --strict:\n" + "\n".join(
        checked.pyright_lines("typed_ok.py"))


def test_checkers_reject_a_parsed_object_assigned_to_the_wrong_type(checked: Checked) -> None:
    mypy = "\n".join(checked.mypy_lines("typed_bad.py"))
    pyright = "\n".join(checked.pyright_lines("typed_bad.py"))
    assert 'Incompatible types in assignment (expression has type "City"' in mypy, checked.mypy.stdout
    assert 'Type "City" is not assignable to declared type "int"' in pyright, checked.pyright.stdout
    assert checked.mypy.returncode == 1 and checked.pyright.returncode == 1  # the probe's error fails each run
