"""rxllm against ADK itself, scenario by scenario: the model requests (system instruction, contents,
tools), the stored session events and the session state of each scenario of ``adk_scenarios.py``
equal the golden file google-adk recorded for it (``tests/fixtures/adk_golden/``, written by
``benchmarks/compare_adk.py --write``), apart from ids and timestamps and the scenario's named
ADK Python / ADK Java differences, where rxllm does what Java does."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from . import adk_scenarios as sc
from .adk_scenarios_rxllm import run_rxllm

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "adk_golden"


def golden(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("scenario", sc.SCENARIOS, ids=[s.name for s in sc.SCENARIOS])
def test_rxllm_records_what_adk_records(scenario: sc.Scenario) -> None:
    expected = sc.expected_for_rxllm(scenario, golden(scenario.name))
    actual = sc.normalise(scenario, run_rxllm(scenario))
    assert actual["requests"] == expected["requests"]
    assert actual["events"] == expected["events"]
    assert actual["state"] == expected["state"]
    assert actual["outcomes"] == expected["outcomes"]  # each run completed, or failed, on both sides
    assert actual["partials"] == expected["partials"]  # the partial texts the caller saw (SSE)


def test_every_scenario_has_a_golden_file_and_every_golden_file_a_scenario() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(s.name for s in sc.SCENARIOS)


def test_every_named_difference_is_documented_and_changes_its_scenario_s_golden_file() -> None:
    used = {name for s in sc.SCENARIOS for name in s.differences}
    assert used == set(sc.DIFFERENCES)  # no stale entry, no undocumented name
    for scenario in sc.SCENARIOS:
        for name in scenario.differences:
            difference = sc.DIFFERENCES[name]
            assert "ADK Java" in difference.java
            before = golden(scenario.name)
            assert difference.rewrite(json.loads(json.dumps(before)), scenario) != before, (scenario.name, name)


def test_every_rxllm_deviation_is_used_and_changes_its_scenario_s_expectation() -> None:
    assert {name for s in sc.SCENARIOS for name in s.deviations} == set(sc.RXLLM_DEVIATIONS)
    for scenario in sc.SCENARIOS:
        for name in scenario.deviations:
            java = golden(scenario.name)
            for difference in scenario.differences:
                java = sc.DIFFERENCES[difference].rewrite(java, scenario)
            before = json.loads(json.dumps(java))
            assert sc.RXLLM_DEVIATIONS[name].rewrite(java, scenario) != before, (scenario.name, name)


def test_the_comparison_sees_a_difference() -> None:
    """The normaliser keeps what matters: a changed tool result or instruction is not equal."""
    scenario = sc.SCENARIOS_BY_NAME["single_agent_tools"]
    expected = sc.expected_for_rxllm(scenario, golden(scenario.name))
    actual = sc.normalise(scenario, run_rxllm(scenario))
    changed = json.loads(json.dumps(actual))
    changed["requests"]["support"][0]["system_instruction"] += " "
    assert changed["requests"] != expected["requests"]
    changed = json.loads(json.dumps(actual))
    changed["events"][2]["content"]["parts"][0]["function_response"]["response"]["status"] = "lost"
    assert changed["events"] != expected["events"]


def test_the_porting_guide_lists_every_difference() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "porting-from-adk-java.md").read_text(encoding="utf-8")
    assert [name for name in [*sc.DIFFERENCES, *sc.RXLLM_DEVIATIONS] if f"| `{name}` |" not in guide] == []
    assert f"The {len(sc.SCENARIOS)} scenarios" in guide


def test_the_harness_table_reports_every_scenario_equal(capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/compare_adk.py --table`` (the rxllm side; google-adk is imported only by ``--write``)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "compare_adk.py"
    spec = importlib.util.spec_from_file_location("compare_adk", path)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    assert harness.table([]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == len(sc.SCENARIOS) + 1
    assert not [row for row in rows if "DIFFERENT" in row]
