"""Keeps the front doors honest (as httpx does) and every docstring example true."""

from __future__ import annotations
import __future__ as future_module

import doctest
import importlib
import pkgutil
import types

import pytest

import rxllm
import rxllm.agents
import rxllm.aio
import rxllm.operators
import rxllm.providers
import rxllm.providers.anthropic
import rxllm.providers.gemini
import rxllm.providers.openai
import rxllm.service
import rxllm.testing
import rxllm.web

PACKAGES = [
    rxllm,
    rxllm.agents,
    rxllm.aio,
    rxllm.operators,
    rxllm.providers,
    rxllm.providers.anthropic,
    rxllm.providers.gemini,
    rxllm.providers.openai,
    rxllm.service,
    rxllm.testing,
    rxllm.web,
]


def _public_attributes(package: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(package).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and not isinstance(value, future_module._Feature)  # `from __future__ import annotations`
    }


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_all_is_sorted_and_unique(package: types.ModuleType) -> None:
    names = list(package.__all__)
    assert names == sorted(names)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_name_in_all_resolves(package: types.ModuleType) -> None:
    missing = [name for name in package.__all__ if not hasattr(package, name)]
    assert missing == []


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_public_attribute_is_in_all(package: types.ModuleType) -> None:
    assert _public_attributes(package) - set(package.__all__) == set()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_exported_classes_and_functions_say_where_they_are_exported(package: types.ModuleType) -> None:
    # Public names live in private modules of the package and are re-exported from its front door.
    for name in package.__all__:
        value = getattr(package, name)
        module = getattr(value, "__module__", None)
        if module is None or not isinstance(value, type | types.FunctionType):
            continue
        assert module.startswith("rxllm"), f"{name} comes from {module}"


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from rxllm import *", namespace)
    assert {k for k in namespace if k != "__builtins__"} == set(rxllm.__all__)


def test_version() -> None:
    assert isinstance(rxllm.__version__, str)
    assert rxllm.__version__.count(".") >= 1


# --- doctests -----------------------------------------------------------------------------------------------


def _module_names() -> list[str]:
    names = ["rxllm"]
    names += [info.name for info in pkgutil.walk_packages(rxllm.__path__, prefix="rxllm.", onerror=lambda _: None)]
    return sorted({name for name in names if not name.endswith(".__main__")})  # importing __main__ runs the CLI


@pytest.mark.parametrize("module_name", _module_names())
def test_docstring_examples(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # an optional dependency that is not installed
        pytest.skip(f"{module_name} needs {exc.name or exc}")
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert results.failed == 0, f"{results.failed} docstring example(s) failed in {module_name} (see output above)"


@pytest.mark.parametrize(
    # a public class's examples are collected with its front door (its __module__, rxllm._core.public)
    "module_name", ["rxllm", "rxllm.agents", "rxllm._core.types", "rxllm._models.sse"]
)
def test_doctests_are_found(module_name: str) -> None:
    results = doctest.testmod(importlib.import_module(module_name), optionflags=doctest.ELLIPSIS)
    assert results.attempted > 0
    assert results.failed == 0
