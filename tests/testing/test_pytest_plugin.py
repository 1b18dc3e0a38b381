"""rxllm's pytest plugin, run in pytest's own ``pytester`` (the shared venv may predate the entry point).

Inner runs disable entry-point autoloading and load the plugin with ``-p``, so they behave the same
whether or not the installed rxllm already declares it.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from rxllm import ConfigurationError
from rxllm.testing import SseRecording, load_sse_recordings, sse_turn

pytest_plugins = ["pytester"]

# The in-process inner runs restore ``sys.modules`` when they end. rxllm and rxllm.testing load
# some names on first use: a name first loaded inside an inner run would leave its module dropped
# from ``sys.modules`` while the front door keeps the name, and the next first use of a sibling name
# would load a second copy of that module (two ``StubResponse`` classes). Load every name now.
for _front_door in (importlib.import_module("rxllm"), importlib.import_module("rxllm.testing")):
    for _name in _front_door.__all__:
        getattr(_front_door, _name)

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"
PLUGIN = "rxllm.testing.pytest_plugin"
Runner = Callable[..., pytest.RunResult]


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Runner:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run_inner(*args: str) -> pytest.RunResult:
        quiet = ("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")
        return pytester.runpytest_inprocess("-p", PLUGIN, "--strict-markers", *quiet, *args)

    return run_inner


def test_the_entry_point_is_declared_in_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"rxllm": PLUGIN}
    module = importlib.import_module(PLUGIN)
    assert callable(module.pytest_generate_tests)


def test_the_fixtures(pytester: pytest.Pytester, run: Runner) -> None:
    pytester.makepyfile(
        test_fixtures="""
        import http.client
        import socket

        from reactivex.testing import TestScheduler

        from rxllm import Chunk, LlmRequest
        from rxllm.testing import ScriptedLlm, StubServer, at_times, scripted_turn

        SEEN = {}

        def test_scheduler_is_a_fresh_clock(test_scheduler):
            assert isinstance(test_scheduler, TestScheduler) and test_scheduler.clock == 0.0
            test_scheduler.advance_to(5.0)

        def test_scheduler_is_fresh_per_test(test_scheduler):
            assert test_scheduler.clock == 0.0

        def test_scripted_llm_runs_on_the_tests_clock(scripted_llm, test_scheduler):
            llm = scripted_llm([at_times(scripted_turn(Chunk(text_delta="hi")), [0.5, 0.5])])
            assert isinstance(llm, ScriptedLlm) and llm.scheduler is test_scheduler
            seen = []
            llm.generate_content(LlmRequest(), stream=True).subscribe(seen.append)
            test_scheduler.advance_to(0.4)
            assert seen == []
            test_scheduler.advance_to(0.5)
            assert [r.text() for r in seen] == ["hi", "hi"]

        def test_scripted_llm_takes_another_scheduler(scripted_llm):
            assert scripted_llm([], scheduler=None).scheduler is None

        def test_stub_server_is_running_and_records_requests(stub_server):
            assert isinstance(stub_server, StubServer)
            client = http.client.HTTPConnection(stub_server.url.removeprefix("http://"), timeout=5)
            client.request("POST", "/v1/chat/completions", body=b'{"stream": true}')
            assert client.getresponse().status == 500  # nothing scripted: a loud 500
            client.close()
            assert stub_server.requests[0].json() == {"stream": True}
            SEEN["url"] = stub_server.url

        def test_stub_server_was_closed_after_the_test():
            host, port = SEEN["url"].removeprefix("http://").split(":")
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
            except OSError:
                return
            raise AssertionError("the previous test's stub server still accepts connections")
        """
    )
    result = run()
    result.assert_outcomes(passed=6)


# --- the plugin costs nothing until a test uses it ----------------------------------------------------

HTTP_LIBRARIES = ("httpx", "httpx2", "httpcore", "httpcore2")
_LOADED = """
import sys
def loaded():
    http = {m.split(".")[0] for m in sys.modules} & {"httpx", "httpx2", "httpcore", "httpcore2"}
    heavy = {m for m in sys.modules if m.startswith(("rxllm._transports.", "rxllm.providers"))}
    heavy |= {"rxllm._models.sse_chat_model"} & set(sys.modules)
    return sorted(http | (heavy - {"rxllm._transports.base"}))
"""


def _python(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", _LOADED + code], capture_output=True, text=True, env=env, check=True)
    lines: list[str] = result.stdout.splitlines()
    return lines


def test_loading_the_plugin_imports_no_http_library_and_no_transport() -> None:
    code = f"import rxllm.testing.pytest_plugin; print(loaded()); assert not {set(HTTP_LIBRARIES)!r} & set(sys.modules)"
    assert _python(code) == ["[]"]


def test_the_names_that_need_http_load_it_when_used() -> None:
    code = (
        "import rxllm.testing, rxllm; print(loaded()); rxllm.testing.replay_sse; "
        "print('httpx2' in sys.modules and 'httpx' not in sys.modules); "
        "from rxllm.testing import parser_for; from rxllm import HttpTransport, SseChatModel; "
        "import rxllm._transports.threaded as t; "
        "print(HttpTransport is t.HttpTransport and 'HttpTransport' in dir(rxllm))"
    )
    assert _python(code) == ["[]", "True", "True"]


def test_a_conftest_may_alias_httpx_with_the_plugin_loaded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpx2.alias_httpx() raises once httpx is imported: loading the plugin must not have imported it.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # other installed plugins import httpx themselves
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest(
        """
        import httpx2

        httpx2.alias_httpx()
        """
    )
    pytester.makepyfile(
        test_aliased="""
        import sys

        import httpx2

        from rxllm import LlmRequest
        from rxllm.providers.openai import OpenAiChatModel
        from rxllm.testing import StubResponse, sse_turn

        def test_rxllm_streams_over_the_aliased_library(stub_server):
            assert sys.modules["httpx"] is httpx2
            stub_server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["Hel", "lo"])))
            model = OpenAiChatModel("m", base_url=stub_server.url + "/v1", api_key="sk-test-not-real")
            final = model.generate_content(LlmRequest(), stream=True).run()
            assert final.text() == "Hello"
            assert stub_server.requests[0].path == "/v1/chat/completions"
        """
    )
    result = pytester.runpytest_subprocess("-p", PLUGIN, "-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=1)


def _recording_folder(base: Path) -> Path:
    folder = base / "recordings"
    (folder / "anthropic").mkdir(parents=True)
    (folder / "anthropic" / "hello.sse").write_bytes(b"".join(sse_turn("anthropic", text=["Hel", "lo"])))
    (folder / "gemini").mkdir()
    (folder / "gemini" / "bye.sse").write_bytes(b"".join(sse_turn("gemini", text=["Bye"])))
    (folder / "gemini" / "bye.expected.json").write_text(json.dumps({"text": "Bye"}))
    return folder


def test_sse_recordings_parametrize_one_case_per_file(pytester: pytest.Pytester, run: Runner) -> None:
    _recording_folder(pytester.path)
    pytester.makepyfile(
        test_replays="""
        import pytest

        from rxllm.testing import SseRecording, assert_stream_protocol

        @pytest.mark.sse_recordings("recordings")
        def test_replay(sse_recording):
            assert isinstance(sse_recording, SseRecording)
            final = assert_stream_protocol(sse_recording.replay())
            expected = sse_recording.expected()
            assert expected is None or final.text() == expected["text"]
            assert final.text() in ("Hello", "Bye")
        """
    )
    result = run("-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_replay?anthropic/hello? PASSED*", "*test_replay?gemini/bye? PASSED*"])


def test_sse_recording_without_the_marker_is_a_usage_error(pytester: pytest.Pytester, run: Runner) -> None:
    pytester.makepyfile(test_bad="def test_replay(sse_recording):\n    pass\n")
    result = run()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*uses the sse_recording fixture without an @pytest.mark.sse_recordings*"])


def test_sse_recordings_with_an_unknown_protocol_fail_collection(pytester: pytest.Pytester, run: Runner) -> None:
    _recording_folder(pytester.path)
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.sse_recordings("recordings", protocol="carrier-pigeon")
        def test_replay(sse_recording):
            pass
        """
    )
    result = run()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*unknown protocol 'carrier-pigeon'*"])


# --- load_sse_recordings, the helper under the marker --------------------------------------------------


def test_every_recorded_transcript_loads_with_its_manifest_protocol() -> None:
    recordings = load_sse_recordings(TRANSCRIPTS)
    manifest = {entry["file"]: entry["protocol"] for entry in json.loads((TRANSCRIPTS / "manifest.json").read_text())}
    assert {f"{r.name}.sse": r.protocol for r in recordings} == manifest
    assert all(r.expected() is not None for r in recordings)


def test_protocol_from_the_directory_and_explicitly(tmp_path: Path) -> None:
    folder = _recording_folder(tmp_path)
    assert [(r.name, r.protocol) for r in load_sse_recordings(folder)] == [
        ("anthropic/hello", "anthropic"),
        ("gemini/bye", "gemini"),
    ]
    [only] = load_sse_recordings(folder, protocol="gemini", pattern="gemini/*.sse")
    assert isinstance(only, SseRecording) and only.replay()[-1].text() == "Bye"
    assert only.expected() == {"text": "Bye"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [("missing", "no folder"), ("empty", "no SSE recordings"), ("unknown-dir", "cannot tell the protocol")],
)
def test_load_sse_recordings_fails_loudly(tmp_path: Path, setup: str, message: str) -> None:
    folder = tmp_path / "recordings"
    if setup != "missing":
        folder.mkdir()
    if setup == "unknown-dir":
        (folder / "misc").mkdir()
        (folder / "misc" / "x.sse").write_bytes(b"data: {}\n\n")
    with pytest.raises(ConfigurationError, match=message):
        load_sse_recordings(folder)
