"""Session stores on the command line: ``rxllm chat --session URL`` and ``rxllm sessions list|show|delete``.

A store URL is ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or a PostgreSQL
URL (``postgresql://user@host:5432/db``). The chat keeps its conversation in the session
``--session-id`` (default ``default``) of the app ``rxllm-chat`` for the user ``--user`` (default:
the login name), so a later ``rxllm chat --session ...`` resumes it.
"""

from __future__ import annotations

import datetime
import getpass
import json
from typing import TextIO

from reactivex import operators as ops

from .._core.errors import ConfigurationError, RxLlmError
from .._core.types import Content
from ..agents import BaseSessionService, Event, PostgresSessionService, Session, SqliteSessionService

__all__ = ["CHAT_APP", "ChatSession", "default_user", "open_store", "run_sessions"]

CHAT_APP = "rxllm-chat"
"""The app name ``rxllm chat`` stores its sessions under."""


def default_user() -> str:
    """The user id sessions are stored for when ``--user`` is not given: the login name."""
    try:
        return getpass.getuser()
    except Exception:  # no login name (a container without one)
        return "user"


def open_store(url: str) -> BaseSessionService:
    """The session service a store URL names; :class:`~rxllm.ConfigurationError` for anything else."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ConfigurationError("a sqlite store URL needs a file: sqlite:///sessions.db")
        return SqliteSessionService(path)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresSessionService(url, min_size=0, max_size=2)
    raise ConfigurationError(
        "a session store is sqlite:///path.db (sqlite:////absolute/path.db) or postgresql://user@host/db"
    )


def close_store(service: BaseSessionService) -> None:
    close = getattr(service, "close", None)
    if callable(close):
        close()


class ChatSession:
    """The chat's conversation in a session store: loaded once, then one exchange appended at a time."""

    def __init__(self, service: BaseSessionService, user_id: str, session_id: str) -> None:
        self._service = service
        self._user_id = user_id
        self.session_id = session_id
        found = service.get_session(CHAT_APP, user_id, session_id).pipe(ops.to_list()).run()
        self.resumed = bool(found)
        self._session: Session = (
            found[0] if found else service.create_session(CHAT_APP, user_id, None, session_id).run()
        )

    def entries(self) -> list[tuple[str, Content]]:
        """The stored conversation as ``(author, content)`` pairs, oldest first."""
        return [(e.author, e.content) for e in self._session.events if e.content is not None and e.content.parts]

    def clear(self) -> None:
        """Delete the stored conversation: the session is deleted and created again, empty, under its id."""
        self._service.delete_session(CHAT_APP, self._user_id, self.session_id).pipe(ops.to_list()).run()
        self._session = self._service.create_session(CHAT_APP, self._user_id, None, self.session_id).run()

    def record(self, question: Content, answer: Content, author: str) -> None:
        """Store one whole exchange (question, then answer)."""
        self._service.append_event(self._session, Event(author="user", content=question)).run()
        self._service.append_event(self._session, Event(author=author, content=answer)).run()


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def run_sessions(
    action: str,
    *,
    store: str,
    app_name: str,
    user_id: str,
    session_id: str | None,
    out: TextIO,
    err: TextIO,
) -> int:
    """``rxllm sessions list|show|delete``; returns the exit code (1: no such session, 2: bad store)."""
    try:
        service = open_store(store)
    except ConfigurationError as exc:
        err.write(f"rxllm sessions: {exc.message}\n")
        return 2
    try:
        if action == "list":
            sessions = service.list_sessions(app_name, user_id).run()
            if not sessions:
                out.write(f"no sessions for user {user_id!r} of app {app_name!r}\n")
            for session in sessions:
                out.write(f"{session.id}\t{_when(session.last_update_time)}\t{len(session.state)} state keys\n")
            return 0
        assert session_id is not None
        found = service.get_session(app_name, user_id, session_id).pipe(ops.to_list()).run()
        if not found:
            err.write(f"rxllm sessions: no session {session_id!r} for user {user_id!r} of app {app_name!r}\n")
            return 1
        if action == "delete":
            service.delete_session(app_name, user_id, session_id).pipe(ops.to_list()).run()
            out.write(f"deleted session {session_id!r}\n")
            return 0
        session = found[0]
        out.write(f"session {session.id!r} of user {user_id!r}, app {app_name!r}: {len(session.events)} events, "
                  f"last update {_when(session.last_update_time)}\n")
        if session.state:
            out.write(f"state: {json.dumps(session.state, ensure_ascii=False, sort_keys=True)}\n")
        for event in session.events:
            calls = [f"{c.name}({json.dumps(c.args, ensure_ascii=False)})" for c in event.function_calls()]
            shown = event.text() or " ".join(calls) or ("(tool results)" if event.function_responses() else "")
            out.write(f"{_when(event.timestamp)}  {event.author}: {shown}\n")
        return 0
    except RxLlmError as exc:
        err.write(f"rxllm sessions: {exc.message}\n")
        return 1
    finally:
        close_store(service)
