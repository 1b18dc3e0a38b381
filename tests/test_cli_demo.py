"""``rxllm demo``: the README's first command ends here; its output is checked line by line."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from rxllm.cli import main
from rxllm.cli._demo import ANSWER, FIRST_ROUND, QUESTION, run_demo
from rxllm.cli._style import Style


def run(provider: str) -> tuple[int, str]:
    out = io.StringIO()
    code = run_demo(provider=provider, pace=0.0, out=out, style=Style(False))
    return code, out.getvalue()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_demo_streams_the_worked_example_and_prints_history_and_usage(provider: str) -> None:
    code, text = run(provider)
    assert code == 0
    lines = text.splitlines()
    assert f"over the {provider} wire format" in lines[0]
    assert f"user    › {QUESTION}" in lines
    assert f"support › {FIRST_ROUND}" in lines
    assert '          → get_order({"order_id": "A17"})' in lines
    assert any(line.startswith("          ← get_order: ") and '"eta": "Tuesday"' in line for line in lines)
    assert f"support › {ANSWER}" in lines
    history = lines[lines.index("Session history (what the next turn's request is built from):") + 1 :][:4]
    assert [h.split()[1] for h in history] == ["user", "support", "support", "support"]
    assert "call get_order" in history[1] and "result get_order" in history[2] and ANSWER in history[3]
    assert "  call 1: 61 prompt + 24 output = 85 tokens (STOP)" in lines
    assert "  call 2: 96 prompt + 21 output = 117 tokens (STOP)" in lines


def test_demo_output_is_the_same_for_every_provider_but_the_first_line() -> None:
    outputs = [run(p)[1].splitlines()[1:] for p in ("openai", "anthropic", "gemini")]
    assert outputs[0] == outputs[1] == outputs[2]


def test_piped_demo_has_no_control_codes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rxllm", "demo", "--pace", "0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert ANSWER in result.stdout


def test_styled_output_on_a_terminal_uses_ansi() -> None:
    assert Style(True).bold("x") == "\x1b[1mx\x1b[0m" and Style(False).bold("x") == "x"


def test_main_rejects_an_unknown_provider(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--provider", "nope"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
