"""The session state as agents see it: ``State`` and the key prefixes (defined in ``rxllm._tools._state``)."""

from __future__ import annotations

from .._tools._state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX, State

__all__ = ["APP_PREFIX", "TEMP_PREFIX", "USER_PREFIX", "State"]
