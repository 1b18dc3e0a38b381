"""Every script in ``examples/`` runs, as a user would run it, and shows what it says it shows.

Each example runs in its own interpreter (``python examples/X.py``) with a timeout; the test
checks its exit code and a key line of its output. An example file without an entry in
``KEY_LINES`` fails the test, so a new example cannot be added without being run here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TIMEOUT = 60

KEY_LINES: dict[str, list[str]] = {
    "stream_to_terminal.py": [
        "model: Streams are Observables: partials carry only new text, then one final carries the whole turn.",
        "[15 partials, then one final: STOP, 20 tokens]",
        "OK: the partials concatenate to the final's text",
    ],
    "custom_provider.py": ["custom provider: OK"],
    "order_status.py": ["OK"],
    "service_events.py": ["ok"],
    "virtual_time_retry.py": [
        "  ok  t=2.400 s: 3 request(s) made",
        "  ok  t=1.200 s: request 3, then on_error(HttpStatusError 503)",
        "virtual-time retry: OK",
    ],
    "switch_map_cancel.py": ["server: connection 1 closed by the client: True", "switch_map cancel: OK"],
    "adk_helloworld.py": ["You> Hi. Roll a die of 60 sides.", "state: rolls = [21]", "helloworld: OK"],
    "adk_writer_reviewer.py": [
        "  user: For context: | [writer] said: Old pond / a frog jumps in / the sound of water.",
        "writer/reviewer: OK",
    ],
    "adk_parallel_research.py": ["papers saw: ['What is new about ponds?']", "parallel research: OK"],
    "adk_loop_refine.py": ["rounds: 2", "loop refine: OK"],
    "adk_transfer_router.py": ["  router -> transfer to billing", "  billing: It takes 3 to 5 business days.",
                               "transfer: OK"],
    "adk_callbacks.py": ["@after_agent_callback2", "callbacks: OK"],
    "adk_dice_prime_examples.py": ["  root_agent -> transfer to roll_agent",
                                   "few-shot examples in root_agent's instruction: 3", "dice/prime: OK"],
    "adk_tool_confirmation.py": ["Manager> {'confirmed': True, 'payload': {'approved_days': 3}}",
                                 "  request_time_off returned {'status': 'ok', 'approved_days': 3}",
                                 "  reimburse returned {'error': 'This tool call is rejected.'}",
                                 "done: ['3 days off']", "tool confirmation: OK"],
    "adk_search_structured.py": ["tools sent: [['googleSearch'], ['functionDeclarations']]",
                                 "declared: ['set_model_response', 'get_current_date']",
                                 "search structured: OK"],
    "fastapi_sse.py": ["stub model: upstream connection closed by the client: True", "fastapi sse: OK"],
    "mcp_toolset.py": ["tools: ['list_notes', 'read_note']", '  call  read_note({"name": "groceries"})',
                       "mcp toolset: OK"],
}
REQUIRED = {"stream_to_terminal.py", "custom_provider.py", "order_status.py", "virtual_time_retry.py",
            "switch_map_cancel.py", "adk_helloworld.py", "adk_writer_reviewer.py", "adk_parallel_research.py",
            "adk_loop_refine.py", "adk_transfer_router.py", "adk_callbacks.py"}
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)  # the examples need no key, and must not pick up a real one
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=ROOT, env=env,
    )


def test_the_required_examples_exist() -> None:
    assert set(SCRIPTS) >= REQUIRED, f"missing examples: {sorted(REQUIRED - set(SCRIPTS))}"


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs_and_shows_its_point(script: str) -> None:
    assert script in KEY_LINES, f"examples/{script} has no key lines in tests/test_examples.py: add them"
    result = run(script)
    assert result.returncode == 0, f"examples/{script} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    lines = result.stdout.splitlines()
    for line in KEY_LINES[script]:
        assert line in lines, f"examples/{script} did not print {line!r}:\n{result.stdout}"


def test_stream_to_terminal_speaks_every_wire_format() -> None:
    for provider in ("anthropic", "gemini"):
        result = run("stream_to_terminal.py", "--provider", provider, "--pace", "0")
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"({provider} wire format)" in result.stdout
        assert "OK: the partials concatenate to the final's text" in result.stdout.splitlines()


def test_fastapi_sse_closes_the_upstream_on_the_asyncio_transport_too() -> None:
    result = run("fastapi_sse.py", "--transport", "asyncio")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stub model: upstream connection closed by the client: True" in result.stdout.splitlines()


def test_piped_example_output_is_plain_text() -> None:
    result = run("stream_to_terminal.py", "--pace", "0")
    assert result.returncode == 0 and "\x1b" not in result.stdout
