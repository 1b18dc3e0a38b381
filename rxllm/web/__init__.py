"""rxllm.web: ADK's development server for rxllm agents -- the API, a browser UI, eval sets.

:func:`create_app` returns the ASGI app (FastAPI) that ``rxllm api-server`` and ``rxllm web``
serve: the apps of an agents folder behind ADK's routes (``/list-apps``, sessions, ``/run``,
``/run_sse``, artifacts, ``/debug/trace``, eval sets) with ADK's camelCase JSON, so ADK's own
clients and dev UI work against it; mount it in your own FastAPI app as ADK's
``get_fast_api_app``. It needs the ``web`` extra (``pip install "rxllm[web]"``); nothing of it is
imported by ``import rxllm``, and the eval names below need no FastAPI.

>>> from rxllm.web import rouge1_f
>>> rouge1_f("It shipped Tuesday.", "It shipped Tuesday!")
1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from .._core.public import publish as _publish
from ._eval import (
    DEFAULT_CRITERIA,
    EvalCase,
    EvalCaseResult,
    EvalSet,
    EvalSetResult,
    EvalStatus,
    load_criteria,
    load_eval_set,
    rouge1_f,
    run_eval_set,
)
from ._loader import AgentLoader, AppLoadError, LoadedApp

if _TYPE_CHECKING:
    from ._app import AgentRunRequest, create_app

__all__ = [
    "AgentLoader",
    "AgentRunRequest",
    "AppLoadError",
    "DEFAULT_CRITERIA",
    "EvalCase",
    "EvalCaseResult",
    "EvalSet",
    "EvalSetResult",
    "EvalStatus",
    "LoadedApp",
    "create_app",
    "load_criteria",
    "load_eval_set",
    "rouge1_f",
    "run_eval_set",
]

_publish(__name__, globals(), [name for name in __all__ if name not in ("AgentRunRequest", "create_app")])
_LAZY = {"AgentRunRequest", "create_app"}


def __getattr__(name: str) -> _Any:
    """``create_app`` and ``AgentRunRequest`` import FastAPI: loaded on first use."""
    if name in _LAZY:
        from . import _app

        value = getattr(_app, name)
        _publish(__name__, {name: value}, (name,))
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
