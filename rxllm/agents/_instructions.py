"""Session-state templating of agent instructions, as ADK's ``inject_session_state``."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import JsonValue

from .._errors import ConfigurationError
from ._state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX

__all__ = ["inject_session_state"]

_PLACEHOLDER = re.compile(r"\{+[^{}]*\}+")
_PREFIXES = (APP_PREFIX, USER_PREFIX, TEMP_PREFIX)


def _is_state_name(name: str) -> bool:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return name.isidentifier()


def inject_session_state(template: str, state: Mapping[str, JsonValue], *, agent_name: str = "") -> str:
    """Replace ``{key}`` with ``state[key]`` and ``{key?}`` with it or ``""`` when absent.

    Braces around anything that is not a state key name (``{"a": 1}``, ``{{x}}`` with inner braces
    kept) are left as they are, so JSON examples in an instruction survive.

    Raises:
        ConfigurationError: a ``{key}`` the state does not have.

    >>> inject_session_state("Help {user:name}.{mood?}", {"user:name": "Ada"})
    'Help Ada.'
    """

    def replace(match: re.Match[str]) -> str:
        raw = match.group(0)
        name = raw.lstrip("{").rstrip("}").strip()
        optional = name.endswith("?")
        if optional:
            name = name[:-1]
        if not _is_state_name(name):
            return raw
        if name in state:
            return str(state[name])
        if optional:
            return ""
        raise ConfigurationError(
            f"the instruction of agent {agent_name!r} refers to state key {name!r}, which the session state "
            f"does not have (write {{{name}?}} to make it optional)"
        )

    return _PLACEHOLDER.sub(replace, template)
