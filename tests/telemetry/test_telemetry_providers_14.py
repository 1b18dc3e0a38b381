"""``Otel.recording()`` reads the providers the OpenTelemetry API holds; the environment is read cheaply.

Every model call, tool call and run asks ``otel()`` whether anything could be recorded. It reads the
API's own globals (what ``set_tracer_provider`` / ``set_meter_provider`` set) and calls the API's
getters only when a global is unset and the environment names a provider to load: the answer is
the getters' answer in every state (checked here against the formula it replaces), a provider set
later is picked up (also in a fresh interpreter: ``test_telemetry_optional.py``), and with nothing
set the getters are not called. ``EnvVar`` is ``os.environ.get`` / ``in``, read at each call.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from rxllm._telemetry import otel as otel_module
from rxllm._telemetry._environ import EnvVar
from rxllm._tools._calls import DEFAULT_MAX_TOOL_RESULT_BYTES, max_tool_result_bytes

NAME = "RXLLM_TEST_ENV_14"


def test_an_env_var_reads_what_os_environ_reads_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    variable = EnvVar(NAME)
    monkeypatch.delenv(NAME, raising=False)
    assert variable.get() is None and not variable.is_set()
    monkeypatch.setenv(NAME, "1000")
    assert variable.get() == os.environ.get(NAME) == "1000" and variable.is_set()
    monkeypatch.setenv(NAME, "")
    assert variable.get() == "" and variable.is_set()
    monkeypatch.delenv(NAME)
    assert variable.get() is None and not variable.is_set()
    monkeypatch.setattr(os, "environ", {NAME: "replaced"})  # not the interpreter's mapping: asked as is
    assert variable.get() == "replaced" and variable.is_set()


def test_the_tool_result_cap_is_still_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RXLLM_MAX_TOOL_RESULT_BYTES", raising=False)
    assert max_tool_result_bytes() == DEFAULT_MAX_TOOL_RESULT_BYTES
    monkeypatch.setenv("RXLLM_MAX_TOOL_RESULT_BYTES", "1000")
    assert max_tool_result_bytes() == 1000
    monkeypatch.setenv("RXLLM_MAX_TOOL_RESULT_BYTES", "nope")
    assert max_tool_result_bytes() == DEFAULT_MAX_TOOL_RESULT_BYTES


def _reference(hooks: otel_module.Otel) -> bool:
    """``recording()`` as it was written before: the API's getters on each call."""
    if not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, NoOpTracerProvider)):
        return True
    return type(metrics.get_meter_provider()).__name__ not in {"_ProxyMeterProvider", "NoOpMeterProvider"}


TRACERS: list[Any] = [None, "proxy", NoOpTracerProvider(), TracerProvider()]
METERS: list[Any] = [None, "proxy", NoOpMeterProvider(), MeterProvider()]


@pytest.mark.parametrize("tracer", TRACERS, ids=lambda p: type(p).__name__ if p != "proxy" else p)
@pytest.mark.parametrize("meter", METERS, ids=lambda p: type(p).__name__ if p != "proxy" else p)
def test_recording_is_what_the_apis_getters_answer(tracer: Any, meter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_METER_PROVIDER", raising=False)
    hooks = otel_module.Otel(otel_module._Settings())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", trace._PROXY_TRACER_PROVIDER if tracer == "proxy" else tracer)
    proxy_meter = metrics_internal._PROXY_METER_PROVIDER
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", proxy_meter if meter == "proxy" else meter)
    assert hooks.recording() is _reference(hooks)
    assert hooks.recording() is (isinstance(tracer, TracerProvider) or isinstance(meter, MeterProvider))


def test_with_nothing_set_the_getters_are_not_called_and_a_provider_set_later_is_picked_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_METER_PROVIDER", raising=False)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    hooks = otel_module.Otel(otel_module._Settings())
    asked: list[str] = []
    real_tracer, real_meter = trace.get_tracer_provider, metrics.get_meter_provider
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: asked.append("tracer") or real_tracer())
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: asked.append("meter") or real_meter())
    assert hooks.recording() is False and asked == []
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TracerProvider())  # what set_tracer_provider sets
    assert hooks.recording() is True and asked == []
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", MeterProvider())
    assert hooks.recording() is True and asked == []


def test_a_provider_the_environment_names_is_loaded_by_the_api_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    hooks = otel_module.Otel(otel_module._Settings())
    loaded = TracerProvider()
    asked: list[str] = []
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: asked.append("tracer") or loaded)
    monkeypatch.setenv("OTEL_PYTHON_TRACER_PROVIDER", "sdk_tracer_provider")
    assert hooks.recording() is True and asked == ["tracer"]
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER")
    meter = MeterProvider()
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: asked.append("meter") or meter)
    monkeypatch.setenv("OTEL_PYTHON_METER_PROVIDER", "sdk_meter_provider")
    assert hooks.recording() is True and asked == ["tracer", "meter"]


def test_an_api_without_the_globals_is_asked_through_its_getters(monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = otel_module.Otel(otel_module._Settings())
    monkeypatch.setattr(hooks, "_globals", None)
    asked: list[str] = []
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: asked.append("tracer") or NoOpTracerProvider())
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: asked.append("meter") or MeterProvider())
    assert hooks.recording() is True and asked == ["tracer", "meter"]
