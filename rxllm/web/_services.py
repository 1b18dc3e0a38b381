"""The stores a server runs on, from the command line's URIs (as ADK's ``--session_service_uri``)."""

from __future__ import annotations

from pathlib import Path

from .._core.errors import ConfigurationError
from ..agents import (
    BaseArtifactService,
    BaseSessionService,
    FileArtifactService,
    InMemoryArtifactService,
    InMemorySessionService,
    PostgresSessionService,
    SqliteSessionService,
)

__all__ = ["artifact_service_from_uri", "close_service", "session_service_from_uri"]


def session_service_from_uri(uri: str | None) -> BaseSessionService:
    """``None`` or ``memory://``: in memory; ``sqlite:///path.db``; ``postgresql://user@host/db``."""
    if uri is None or uri in ("memory://", "memory:"):
        return InMemorySessionService()
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :]
        if not path:
            raise ConfigurationError("a sqlite session store URI needs a file: sqlite:///sessions.db")
        return SqliteSessionService(path)
    if uri.startswith(("postgresql://", "postgres://")):
        return PostgresSessionService(uri, min_size=0, max_size=8)
    raise ConfigurationError(
        "a session service URI is memory://, sqlite:///path.db (sqlite:////absolute/path.db) or "
        "postgresql://user@host/db"
    )


def artifact_service_from_uri(uri: str | None) -> BaseArtifactService:
    """``None`` or ``memory://``: in memory; ``file:///path/to/folder`` (or ``file://relative/folder``)."""
    if uri is None or uri in ("memory://", "memory:"):
        return InMemoryArtifactService()
    if uri.startswith("file://"):
        path = uri[len("file://") :]
        if not path:
            raise ConfigurationError("a file artifact store URI needs a folder: file:///var/lib/artifacts")
        return FileArtifactService(Path(path))
    raise ConfigurationError("an artifact service URI is memory:// or file:///path/to/folder")


def close_service(service: object) -> None:
    """Close a store that has a ``close`` (SQLite, PostgreSQL, file artifacts); nothing otherwise."""
    close = getattr(service, "close", None)
    if callable(close):
        close()
