"""JSON safety for what goes back to the model: tool results, and function calls and responses in history.

A provider request is JSON (``allow_nan=False``, UTF-8). A value JSON cannot carry -- ``NaN`` or
``Infinity``, an int longer than Python's int-to-text limit (4,300 digits by default), a string
with a lone surrogate, an arbitrary object, a cycle -- would make *every* later request of the
conversation fail. So tool results are checked when they are produced (a bad one becomes an error
result for that call), and history is checked when a request is built (a bad stored value is
replaced by an error the model can read, so a session holding one keeps working).

>>> json_problem({"ok": [1, 2.5, "x"]}) is None
True
>>> json_problem({"result": float("nan")})
'Out of range float values are not JSON compliant'
>>> safe_response({"result": 10**5000})["error"][:46]
'the value cannot be sent as JSON: Exceeds the '
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from .._core.json_codec import without_lone_surrogates
from .._core.types import Content, Part

__all__ = ["json_problem", "jsonable", "safe_content", "safe_response"]


def json_problem(value: Any) -> str | None:
    """Why ``value`` cannot be sent as JSON (as the providers encode requests), or None when it can."""
    try:
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        return str(exc) or type(exc).__name__
    return None


def jsonable(value: Any) -> tuple[Any, str | None]:
    """``value`` converted by pydantic (models, dates...) and checked: ``(converted, None)`` or ``(None, why)``."""
    try:
        converted = to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError, RecursionError) as exc:
        return None, str(exc) or type(exc).__name__
    problem = json_problem(converted)
    return (None, problem) if problem is not None else (converted, None)


def safe_response(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` when JSON can carry it, else ``{"error": ...}`` saying why."""
    problem = json_problem(response)
    return response if problem is None else {"error": f"the value cannot be sent as JSON: {problem}"}


def safe_content(content: Content) -> Content:
    """``content`` with every function response and call argument JSON cannot carry replaced by an error.

    A lone surrogate in any of its text is replaced by U+FFFD first (rxllm's one rule for text
    UTF-8 cannot carry), so a session stored with one still builds a request.
    Returns ``content`` itself (no copy) when nothing needed replacing, which is the usual case.
    """
    content = without_lone_surrogates(content)
    parts: list[Part] | None = None
    for index, part in enumerate(content.parts):
        replaced = part
        response = part.function_response
        if response is not None and json_problem(response.response) is not None:
            fixed = response.model_copy(update={"response": safe_response(response.response)})
            replaced = part.model_copy(update={"function_response": fixed})
        call = part.function_call
        if call is not None and json_problem(call.args) is not None:
            replaced = part.model_copy(update={"function_call": call.model_copy(update={"args": {}})})
        if replaced is not part:
            if parts is None:
                parts = list(content.parts[:index])
            parts.append(replaced)
        elif parts is not None:
            parts.append(part)
    return content if parts is None else content.model_copy(update={"parts": tuple(parts)})
