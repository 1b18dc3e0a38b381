"""Fixtures shared by the agents' test modules."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_status.py"


@pytest.fixture(scope="module")
def example() -> types.ModuleType:
    """``examples/order_status.py``, the worked example, loaded as a module (its turns' bodies, its tool)."""
    spec = importlib.util.spec_from_file_location("order_status_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
