"""What the persistent session stores share (private): events and state scopes as JSON."""

from __future__ import annotations

import json

from pydantic import JsonValue, ValidationError

from .._errors import StoreError
from .._offthread import call_off_thread
from ._event import Event

__all__ = ["call_off_thread", "dumps_state", "event_from_json", "event_to_json", "loads_state"]


def event_to_json(event: Event) -> str:
    """An event as the stores keep it: JSON by alias (explicit, whatever ``model_dump``'s default)."""
    return event.model_dump_json(by_alias=True)


def event_from_json(text: str | bytes) -> Event:
    """An event read back from a store; a row that is not a valid event is a :class:`~rxllm.StoreError`."""
    try:
        return Event.model_validate_json(text, by_alias=True)
    except ValidationError as exc:
        raise StoreError(f"a stored event could not be read back: {exc.error_count()} validation error(s)") from exc


def dumps_state(state: dict[str, JsonValue]) -> str:
    """A state scope as stored (JSON text)."""
    return json.dumps(state, separators=(",", ":"), ensure_ascii=False)


def loads_state(text: str | bytes | None) -> dict[str, JsonValue]:
    """A stored state scope (an empty dict for NULL)."""
    if text is None:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise StoreError("a stored state is not a JSON object")
    return value
