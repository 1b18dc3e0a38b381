"""``State``: a session's state as a tool or callback sees it, recording what it changes."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping

from pydantic import JsonValue, TypeAdapter, ValidationError

from .._errors import ConfigurationError

__all__ = ["APP_PREFIX", "TEMP_PREFIX", "USER_PREFIX", "State"]

APP_PREFIX = "app:"
"""State keys shared by every session of the app."""
USER_PREFIX = "user:"
"""State keys shared by every session of the user (within the app)."""
TEMP_PREFIX = "temp:"
"""State keys that live for the current invocation only and are never persisted."""

_JSON: TypeAdapter[JsonValue] = TypeAdapter(JsonValue)


class State(Mapping[str, JsonValue]):
    """The session state plus the changes made through this object (ADK's ``State``).

    Reading sees the changes; ``state[key] = value`` records the change in :meth:`delta`, which
    the runtime attaches to the next stored event as ``actions.state_delta``. Values must be JSON
    values (they are persisted). Keys cannot be deleted (ADK has no deletion either).

    >>> state = State({"visits": 1})
    >>> state["visits"] = state["visits"] + 1
    >>> state["visits"], state.delta()
    (2, {'visits': 2})
    """

    def __init__(self, value: Mapping[str, JsonValue] | None = None) -> None:
        self._value: dict[str, JsonValue] = dict(value or {})
        self._delta: dict[str, JsonValue] = {}

    def __getitem__(self, key: str) -> JsonValue:
        if key in self._delta:
            return self._delta[key]
        return self._value[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._value
        yield from (key for key in self._delta if key not in self._value)

    def __len__(self) -> int:
        return len(self._value) + sum(1 for key in self._delta if key not in self._value)

    def __setitem__(self, key: str, value: JsonValue) -> None:
        if not isinstance(key, str):
            raise ConfigurationError(f"state keys must be strings, got {type(key).__name__}")
        try:
            checked = _JSON.validate_python(value)
        except ValidationError as exc:
            raise ConfigurationError(
                f"state value for {key!r} must be a JSON value (str, int, float, bool, None, list, dict), "
                f"got {type(value).__name__}"
            ) from exc
        self._delta[key] = checked

    def update(self, values: Mapping[str, JsonValue]) -> None:
        """Set several keys."""
        for key, value in values.items():
            self[key] = value

    def has_delta(self) -> bool:
        """Whether anything was set since the last :meth:`take_delta`."""
        return bool(self._delta)

    def delta(self) -> dict[str, JsonValue]:
        """A copy of the changes recorded since the last :meth:`take_delta`."""
        return copy.deepcopy(self._delta)

    def take_delta(self) -> dict[str, JsonValue]:
        """Return the recorded changes and fold them into the base value (they stay visible)."""
        taken = self._delta
        self._value.update(taken)
        self._delta = {}
        return copy.deepcopy(taken)

    def to_dict(self) -> dict[str, JsonValue]:
        """A copy of the whole state, changes included."""
        return copy.deepcopy({**self._value, **self._delta})

    def __repr__(self) -> str:
        return f"State({self.to_dict()!r}, delta={self._delta!r})"
