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

__all__ = ["json_problem", "jsonable", "plain_json_within", "safe_content", "safe_response"]

_INT_BOUND = 10**600  # |n| below it: fewer digits than any int-to-text limit Python allows (640, or none)
_PLAIN_DEPTH = 64  # how deep a container :func:`plain_json_within` answers for


def plain_json_within(value: Any, cap: int) -> bool:
    """Whether ``value`` is a tree of JSON's own types that JSON certainly carries, counting at most
    ``cap`` (the count of ``rxllm._tools._calls``' size check: a string its length plus 2, another
    leaf 8, a container 2 plus its number of items).

    JSON's own types are exactly (no subclass) ``dict`` with ``str`` keys, ``list``, ``tuple``,
    ``str`` that UTF-8 encodes (no lone surrogate), ``int`` under 600 digits, finite ``float``,
    ``bool`` and ``None``; the tree is a ``dict``, ``list`` or ``tuple`` at most 64 containers deep
    that reaches no container twice. Such a value encodes as the providers encode requests, and
    pydantic's conversion (:func:`jsonable`) gives it back equal, tuples as lists: the same count.
    False says nothing: the caller checks the value the general way.
    """
    total = 0
    seen: set[int] = set()
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        container, depth = pending.pop()
        kind = type(container)
        if not (kind is dict or kind is list or kind is tuple) or id(container) in seen:
            return False
        seen.add(id(container))
        total += 2 + len(container)
        if total > cap:  # (before its items: a container past the cap is not walked)
            return False
        items: Any = container
        if kind is dict:
            items = container.values()
            for key in container:
                if type(key) is not str:
                    return False
                total += len(key) + 2
                if total > cap or not (key.isascii() or _encodes(key)):  # (no text past the cap is copied)
                    return False
        for item in items:
            kind = type(item)
            if kind is str:
                total += len(item) + 2
                if total > cap or not (item.isascii() or _encodes(item)):
                    return False
            elif kind is int:
                if not -_INT_BOUND < item < _INT_BOUND:
                    return False
                total += 8
            elif kind is float:
                if item - item != 0.0:  # NaN or an infinity
                    return False
                total += 8
            elif item is None or kind is bool:
                total += 8
            elif (kind is dict or kind is list or kind is tuple) and depth < _PLAIN_DEPTH:
                pending.append((item, depth + 1))
            else:
                return False
        if total > cap:
            return False
    return True


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_NO_CAP = 1 << 62


def json_problem(value: Any) -> str | None:
    """Why ``value`` cannot be sent as JSON (as the providers encode requests), or None when it can."""
    if plain_json_within(value, _NO_CAP):  # (the usual value: nothing to encode to know it)
        return None
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
