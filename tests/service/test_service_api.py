"""The front door of rxllm.service, its docstring examples, the example script, and the event types."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import importlib.util
import pkgutil
import sys
import types
import typing
from pathlib import Path

import pytest

import rxllm.service
from rxllm import FunctionCall, FunctionResponse, LlmResponse

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "service_events.py"


def test_all_is_sorted_unique_and_complete() -> None:
    names = list(rxllm.service.__all__)
    assert names == sorted(names) and len(names) == len(set(names))
    assert all(hasattr(rxllm.service, name) for name in names)
    public = {
        name
        for name, value in vars(rxllm.service).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert public == set(names)
    namespace: dict[str, object] = {}
    exec("from rxllm.service import *", namespace)
    assert {name for name in namespace if name != "__builtins__"} == set(names)


def _service_modules() -> list[str]:
    return ["rxllm.service"] + [
        f"rxllm.service.{info.name}" for info in pkgutil.iter_modules(rxllm.service.__path__)
    ]


@pytest.mark.parametrize("module_name", _service_modules())
def test_docstring_examples(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_event_is_immutable_with_a_literal_kind_discriminator() -> None:
    call = FunctionCall(id="c1", name="get_order", args={"order_id": "A17"})
    result = FunctionResponse(id="c1", name="get_order", response={"ok": True})
    events: list[rxllm.service.AiServiceStreamingEvent] = [
        rxllm.service.RetrievedContentsEvent(("snippet",)),
        rxllm.service.PartialThinkingEvent("hmm"),
        rxllm.service.PartialResponseEvent("Hi"),
        rxllm.service.PartialToolCallEvent(0, "c1", "get_order", '{"order'),
        rxllm.service.CompleteToolCallEvent(0, call),
        rxllm.service.BeforeToolExecutionEvent(call),
        rxllm.service.AfterToolExecutionEvent(call, result, False),
        rxllm.service.IntermediateResponseEvent(LlmResponse()),
        rxllm.service.FinalResponseEvent(LlmResponse()),
    ]
    union = set(typing.get_args(rxllm.service.AiServiceStreamingEvent))
    assert {type(event) for event in events} == union
    kinds = set()
    for event in events:
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.kind = "other"  # type: ignore[misc, assignment]
        kind_type = typing.get_type_hints(type(event))["kind"]
        assert typing.get_origin(kind_type) is typing.Literal and typing.get_args(kind_type) == (event.kind,)
        kinds.add(event.kind)
    assert len(kinds) == len(events)
    # values, not identities:
    assert rxllm.service.PartialResponseEvent("Hi") == rxllm.service.PartialResponseEvent("Hi")


@pytest.mark.parametrize("argv", [[], ["--guardrail"]], ids=["plain", "guardrail"])
def test_the_example_runs_and_succeeds(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("service_events_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        assert module.main(argv) == 0
    finally:
        del sys.modules[spec.name]
    out = capsys.readouterr().out
    assert out.rstrip().endswith("ok")
    assert "before_tool_execution  call_a" in out
