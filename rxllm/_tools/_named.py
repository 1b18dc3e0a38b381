"""``Named``: what agents and tools share, a name they are picked by and a description of what they do."""

from __future__ import annotations

__all__ = ["Named"]


class Named:
    """A name and a description, read only; the base of :class:`BaseAgent` and :class:`BaseTool`.

    Subclasses check that the name suits them (an agent's is a Python identifier, a tool's what a
    model accepts) before they call ``__init__``.
    """

    def __init__(self, name: str, description: str) -> None:
        self._name = name
        self._description = description

    @property
    def name(self) -> str:
        """The name: an agent's is the ``author`` of its events, a tool's is what the model calls it by."""
        return self._name

    @property
    def description(self) -> str:
        """What it does: for the model (a tool), or for agents choosing whom to hand over to (an agent)."""
        return self._description

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"
