"""Session-state templating of agent instructions, as ADK's ``inject_session_state``, and the identity
instruction every agent's requests carry (ADK Java's ``flows/llmflows/Identity.java``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydantic import JsonValue
from reactivex import operators as ops

from ..._core.errors import ConfigurationError
from ..._tools import ReadonlyContext
from .._artifacts.service import artifact_text
from .._sessions.state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX

if TYPE_CHECKING:
    from .._artifacts.service import BaseArtifactService
    from .._sessions.base import Session

__all__ = ["InstructionProvider", "artifact_loader", "identity_instruction", "inject_session_state"]

InstructionProvider = Callable[[ReadonlyContext], str]
"""A dynamic instruction: called before every model call with a read-only view of the run."""

_ARTIFACT = "artifact."


def identity_instruction(name: str, description: str) -> str:
    """The instruction telling an agent's model which agent it is, worded as ADK Java's ``Identity``.

    >>> identity_instruction("support", "")
    'You are an agent. Your internal name is "support".'
    >>> identity_instruction("support", "Answers questions about orders.")
    'You are an agent. Your internal name is "support". The description about you is "Answers questions about orders.".'
    """
    text = f'You are an agent. Your internal name is "{name}".'
    if description:
        text += f' The description about you is "{description}".'
    return text

ArtifactLoader = Callable[[str], "str | None"]


def artifact_loader(service: BaseArtifactService | None, session: Session) -> ArtifactLoader | None:
    """What ``{artifact.name}`` reads through: the latest version of the session's artifact, as text (None if absent).

    It blocks the building of the request until the artifact service answered.
    """
    if service is None:
        return None

    def load(filename: str) -> str | None:
        found = service.load_artifact(session.app_name, session.user_id, session.id, filename).pipe(ops.to_list()).run()
        return artifact_text(found[0], filename) if found else None

    return load


_PLACEHOLDER = re.compile(r"\{+[^{}]*\}+")
_PREFIXES = (APP_PREFIX, USER_PREFIX, TEMP_PREFIX)


def _is_state_name(name: str) -> bool:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return name.isidentifier()


def inject_session_state(
    template: str, state: Mapping[str, JsonValue], *, agent_name: str = "", artifacts: ArtifactLoader | None = None
) -> str:
    """Replace ``{key}`` with ``state[key]`` and ``{key?}`` with it or ``""`` when absent.

    ``{artifact.name}`` (and ``{artifact.name?}``) is replaced by the text of the session's
    artifact ``name`` (latest version), read through ``artifacts``.

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
        if name.startswith(_ARTIFACT) and len(name) > len(_ARTIFACT):
            return _artifact(name[len(_ARTIFACT) :], optional)
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

    def _artifact(filename: str, optional: bool) -> str:
        if artifacts is None:
            raise ConfigurationError(
                f"the instruction of agent {agent_name!r} refers to artifact {filename!r}, but the run has no "
                "artifact service (Runner(..., artifact_service=...))"
            )
        text = artifacts(filename)
        if text is not None:
            return text
        if optional:
            return ""
        raise ConfigurationError(
            f"the instruction of agent {agent_name!r} refers to artifact {filename!r}, which the session does "
            f"not have (write {{artifact.{filename}?}} to make it optional)"
        )

    return _PLACEHOLDER.sub(replace, template)
