"""What a tool context calls on the run's artifact and memory services, as protocols.

The services themselves belong to the agent runtime (``rxllm.agents.BaseArtifactService``,
``BaseMemoryService``); the tool layer sits below it, so :class:`~rxllm._tools._context.ToolContext`
sees them only through :class:`ArtifactStore` and :class:`MemorySearch`, which every such service
satisfies. The memory search's answer (:class:`SearchMemoryResponse` of :class:`MemoryEntry`)
is what a tool reads, so it is defined here and re-exported by ``rxllm.agents``.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import Field

from .._core.types import Content, Part, _Model
from .._rx.aio import AwaitableObservable, MaybeObservable

__all__ = ["ArtifactStore", "MemoryEntry", "MemorySearch", "SearchMemoryResponse"]


class MemoryEntry(_Model):
    """One remembered piece of a conversation (ADK's ``MemoryEntry``).

    Attributes:
        content: what was said.
        author: who said it (``"user"`` or the agent's name).
        timestamp: when, as ISO 8601 text (it is shown to the model).
    """

    content: Content
    author: str | None = None
    timestamp: str | None = None


class SearchMemoryResponse(_Model):
    """The memories a search found (ADK's ``SearchMemoryResponse``)."""

    memories: tuple[MemoryEntry, ...] = Field(default_factory=tuple)


class ArtifactStore(Protocol):
    """What a context calls on the run's artifact service (``rxllm.agents.BaseArtifactService`` is one)."""

    def save_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, artifact: Part
    ) -> AwaitableObservable[int]: ...

    def load_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, version: int | None = None
    ) -> MaybeObservable[Part]: ...

    def list_artifact_keys(self, app_name: str, user_id: str, session_id: str) -> AwaitableObservable[list[str]]: ...


class MemorySearch(Protocol):
    """What a tool context calls on the run's memory service (``rxllm.agents.BaseMemoryService`` is one)."""

    def search_memory(self, app_name: str, user_id: str, query: str) -> AwaitableObservable[SearchMemoryResponse]: ...
