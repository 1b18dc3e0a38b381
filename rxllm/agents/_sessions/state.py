"""Session state: ``State`` (defined with the shared tool layer) and the one function that applies a ``state_delta``."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from pydantic import JsonValue

from ..._tools._state import APP_PREFIX, STATE_REMOVED, TEMP_PREFIX, USER_PREFIX, State

__all__ = [
    "APP_PREFIX",
    "STATE_REMOVED",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "State",
    "apply_state_delta",
    "strip_temp_keys",
]


def apply_state_delta(
    delta: Mapping[str, JsonValue],
    *,
    app: dict[str, JsonValue],
    user: dict[str, JsonValue],
    session: dict[str, JsonValue],
) -> set[str]:
    """Apply an event's ``state_delta`` to a session's three stored state scopes, in place.

    The one place a ``state_delta`` is interpreted: every session service (memory, SQLite,
    PostgreSQL) stores state through it, so they cannot drift. ``app:`` keys go to ``app`` (shared
    by every session of the app), ``user:`` keys to ``user`` (every session of the user), other
    keys to ``session``; ``temp:`` keys are dropped (never stored). Keys keep their prefix. A key
    mapped to :data:`STATE_REMOVED` is deleted from its scope (ADK's ``State.REMOVED``). Values
    are deep-copied, so the caller's delta can change afterwards without touching the store.

    Returns:
        The scopes that changed: a subset of ``{"app", "user", "session"}`` (a store writes only
        those back; PostgreSQL locks only those rows, so call it on empty dicts to ask which: a
        key deletion must count as a change of its scope even when the key is absent).

    >>> app, user, session = {}, {"user:name": "Ada"}, {"draft": "x"}
    >>> sorted(apply_state_delta({"app:tier": "gold", "temp:scratch": 1, "visits": 2, "draft": STATE_REMOVED},
    ...                          app=app, user=user, session=session))
    ['app', 'session']
    >>> app, user, session
    ({'app:tier': 'gold'}, {'user:name': 'Ada'}, {'visits': 2})
    """
    changed: set[str] = set()
    for key, value in delta.items():
        if key.startswith(TEMP_PREFIX):
            continue
        if key.startswith(APP_PREFIX):
            target, scope = app, "app"
        elif key.startswith(USER_PREFIX):
            target, scope = user, "user"
        else:
            target, scope = session, "session"
        if value == STATE_REMOVED:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(value)
        changed.add(scope)
    return changed


def strip_temp_keys(delta: Mapping[str, JsonValue]) -> dict[str, JsonValue] | None:
    """The delta without its ``temp:`` keys, or None when it has none (the stored event keeps its delta)."""
    if not delta or not any(key.startswith(TEMP_PREFIX) for key in delta):
        return None
    return {key: value for key, value in delta.items() if not key.startswith(TEMP_PREFIX)}
