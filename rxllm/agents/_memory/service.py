"""Memory: what a user said in earlier sessions, searchable by later ones (ADK's ``BaseMemoryService``).

Add a session when it ends (:meth:`BaseMemoryService.add_session_to_memory`); later runs search
it with :meth:`~BaseMemoryService.search_memory`, from a tool through
``ToolContext.search_memory``, or by giving the agent the ``load_memory`` tool.

>>> from reactivex import operators as ops
>>> from rxllm import Content, Part
>>> from rxllm.agents import Event, InMemoryMemoryService, Session
>>> said = Event(author="user", content=Content(role="user", parts=(Part.from_text("My cat is called Tom"),)))
>>> memory = InMemoryMemoryService()
>>> memory.add_session_to_memory(Session(id="s1", app_name="pets", user_id="u1", events=(said,))).pipe(
...     ops.to_list()).run()  # completes without items, like ADK's Completable
[]
>>> [m.content.text() for m in memory.search_memory("pets", "u1", "what is the cat called").run().memories]
['My cat is called Tom']
"""

from __future__ import annotations

import abc
import datetime
import re
import threading
from collections.abc import Sequence
from typing import Protocol

from reactivex import operators as ops

from ..._core.types import Content
from ..._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from ..._rx.direct import call_now
from ..._tools._context import SessionKey
from ..._tools._services import MemoryEntry, SearchMemoryResponse

__all__ = ["BaseMemoryService", "InMemoryMemoryService", "MemoryEntry", "SearchMemoryResponse"]

_WORD = re.compile(r"[A-Za-z]+")


class EventLike(Protocol):
    """What memory reads of an event (``rxllm.agents.Event`` is one)."""

    @property
    def author(self) -> str: ...

    @property
    def content(self) -> Content | None: ...

    @property
    def timestamp(self) -> float: ...


class SessionLike(SessionKey, Protocol):
    """What memory reads of a session (``rxllm.agents.Session`` is one)."""

    @property
    def events(self) -> Sequence[EventLike]: ...


class BaseMemoryService(abc.ABC):
    """Where memories live. Every method returns a cold Observable: subscribing does the work."""

    @abc.abstractmethod
    def add_session_to_memory(self, session: SessionLike) -> MaybeObservable[None]:
        """Remember the session's events; complete without items. Adding a session again replaces it."""

    @abc.abstractmethod
    def search_memory(self, app_name: str, user_id: str, query: str) -> AwaitableObservable[SearchMemoryResponse]:
        """Emit the user's memories (within the app) that match ``query``."""


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text)}


class InMemoryMemoryService(BaseMemoryService):
    """Keyword memory in process memory (prototyping, tests), as ADK's ``InMemoryMemoryService``.

    An event matches when it shares a word (letters only, case-insensitive) with the query; the
    memories come in the order the sessions were added, each session's events in order. Only
    events with text are kept. Thread-safe; each method works and emits during subscribe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str], dict[str, list[tuple[frozenset[str], MemoryEntry]]]] = {}

    def add_session_to_memory(self, session: SessionLike) -> MaybeObservable[None]:
        """Remember the session's events; see :meth:`BaseMemoryService.add_session_to_memory`."""

        def add() -> None:
            kept: list[tuple[frozenset[str], MemoryEntry]] = []
            for event in session.events:
                content = event.content
                if content is None or not content.parts:
                    continue
                words = frozenset(_words(" ".join(part.text for part in content.parts if part.text)))
                if not words:
                    continue
                when = datetime.datetime.fromtimestamp(event.timestamp, tz=datetime.UTC).isoformat()
                kept.append((words, MemoryEntry(content=content, author=event.author, timestamp=when)))
            with self._lock:
                user = self._sessions.setdefault((session.app_name, session.user_id), {})
                user.pop(session.id, None)
                user[session.id] = kept

        return MaybeObservable(call_now(add).pipe(ops.ignore_elements()))

    def search_memory(self, app_name: str, user_id: str, query: str) -> AwaitableObservable[SearchMemoryResponse]:
        """Emit the matching memories; see :meth:`BaseMemoryService.search_memory`."""

        def search() -> SearchMemoryResponse:
            wanted = _words(query)
            with self._lock:
                sessions = list(self._sessions.get((app_name, user_id), {}).values())
            found = [entry for events in sessions for words, entry in events if words & wanted]
            return SearchMemoryResponse(memories=tuple(found))

        return awaitable(call_now(search))
