"""``State``: a session's state as a tool or callback sees it, recording what it changes."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping

from pydantic import JsonValue, TypeAdapter, ValidationError

from .._core.errors import ConfigurationError

__all__ = ["APP_PREFIX", "STATE_REMOVED", "TEMP_PREFIX", "USER_PREFIX", "State"]

APP_PREFIX = "app:"
"""State keys shared by every session of the app."""
USER_PREFIX = "user:"
"""State keys shared by every session of the user (within the app)."""
TEMP_PREFIX = "temp:"
"""State keys that live for the current invocation only and are never persisted."""

_JSON: TypeAdapter[JsonValue] = TypeAdapter(JsonValue)


STATE_REMOVED: JsonValue = "__rxllm.state.removed__"
"""The JSON value a deleted key maps to in an event's ``actions.state_delta`` (ADK's ``State.REMOVED``).

``state_delta`` stays plain JSON: ``del state["k"]`` records ``{"k": STATE_REMOVED}``, and the
session services' one delta function (``rxllm.agents._sessions.state.apply_state_delta``) removes the key.
Storing this exact string as a value is therefore a deletion."""

_MUTABLE = (list, dict)


class State(Mapping[str, JsonValue]):
    """The session state plus the changes made through this object (ADK's ``State``).

    Reading sees the changes; ``state[key] = value`` records the change in :meth:`delta`, which
    the runtime attaches to the next stored event as ``actions.state_delta``. Values must be JSON
    values (they are persisted).

    ``del state[key]`` (or :meth:`remove`) deletes a key: the delta maps it to
    :data:`STATE_REMOVED` and the session service removes it when the event is stored.

    **In-place changes are persisted like an assignment.** A list or dict read from the state and
    changed in place (``state["rolls"].append(21)``) is compared with the value as it was read when
    the delta is taken, and a changed value enters the delta as if it had been assigned. (A value
    that is no longer JSON then fails loudly with :class:`~rxllm.ConfigurationError`.)

    >>> state = State({"visits": 1, "rolls": [3]})
    >>> state["visits"] = state["visits"] + 1
    >>> state["rolls"].append(21)
    >>> del state["visits"]
    >>> state.delta() == {"visits": STATE_REMOVED, "rolls": [3, 21]}
    True
    >>> "visits" in state, len(state)
    (False, 1)
    """

    def __init__(self, value: Mapping[str, JsonValue] | None = None) -> None:
        self._value: dict[str, JsonValue] = dict(value or {})
        self._delta: dict[str, JsonValue] = {}
        self._read: dict[str, JsonValue] = {}  # mutable values as first read from _value, to spot in-place changes

    def __getitem__(self, key: str) -> JsonValue:
        if key in self._delta:
            value = self._delta[key]
            if value == STATE_REMOVED:
                raise KeyError(key)
            return value
        value = self._value[key]
        if isinstance(value, _MUTABLE) and key not in self._read:
            self._read[key] = copy.deepcopy(value)
        return value

    def __contains__(self, key: object) -> bool:
        if key in self._delta:
            return self._delta[key] != STATE_REMOVED
        return key in self._value

    def __iter__(self) -> Iterator[str]:
        yield from (key for key in self._value if self._delta.get(key) != STATE_REMOVED)
        yield from (key for key, value in self._delta.items() if key not in self._value and value != STATE_REMOVED)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __setitem__(self, key: str, value: JsonValue) -> None:
        if not isinstance(key, str):
            raise ConfigurationError(f"state keys must be strings, got {type(key).__name__}")
        self._delta[key] = _checked(key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.remove(key)

    def remove(self, key: str) -> JsonValue:
        """Delete ``key`` (ADK's ``State.remove``): return its value, or None when it was absent.

        The deletion is recorded in the delta as ``{key: STATE_REMOVED}`` either way.
        """
        previous = self.get(key)
        self._delta[key] = STATE_REMOVED
        self._read.pop(key, None)
        return previous

    def update(self, values: Mapping[str, JsonValue]) -> None:
        """Set several keys."""
        for key, value in values.items():
            self[key] = value

    def _mutated(self) -> dict[str, JsonValue]:
        """Values read from the base and changed in place since (checked: they must still be JSON)."""
        changed: dict[str, JsonValue] = {}
        for key, before in self._read.items():
            if key in self._delta or key not in self._value:
                continue
            now = self._value[key]
            if now != before:
                changed[key] = _checked(key, now)
        return changed

    def has_delta(self) -> bool:
        """Whether anything was set, deleted or changed in place since the last :meth:`take_delta`."""
        return bool(self._delta) or (bool(self._read) and bool(self._mutated()))  # (nothing read: nothing changed)

    def delta(self) -> dict[str, JsonValue]:
        """A copy of the changes recorded since the last :meth:`take_delta` (in-place changes included)."""
        return copy.deepcopy({**self._mutated(), **self._delta})

    def take_delta(self) -> dict[str, JsonValue]:
        """Return the recorded changes and fold them into the base value (they stay visible)."""
        mutated = self._mutated() if self._read else {}  # (nothing read: nothing changed in place)
        for key in mutated:  # the changed object stays the one the caller holds
            self._read[key] = copy.deepcopy(self._value[key])
        for key, value in self._delta.items():
            if value == STATE_REMOVED:
                self._value.pop(key, None)
                self._read.pop(key, None)
            else:
                self._value[key] = value
                if isinstance(value, _MUTABLE):
                    self._read[key] = copy.deepcopy(value)
        taken = {**mutated, **self._delta}
        self._delta = {}
        return copy.deepcopy(taken) if taken else {}  # (what deepcopy gives for an empty dict, without its calls)

    def to_dict(self) -> dict[str, JsonValue]:
        """A copy of the whole state, changes included."""
        return copy.deepcopy({key: self[key] for key in self})

    def __repr__(self) -> str:
        return f"State({self.to_dict()!r}, delta={self._delta!r})"


def _checked(key: str, value: object) -> JsonValue:
    try:
        return _JSON.validate_python(value)
    except ValidationError as exc:
        raise ConfigurationError(
            f"state value for {key!r} must be a JSON value (str, int, float, bool, None, list, dict), "
            f"got {type(value).__name__}"
        ) from exc
