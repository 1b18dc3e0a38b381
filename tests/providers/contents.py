"""Conversation turns for the request-mapper tests: ``user(...)`` and ``model(...)`` contents."""

from __future__ import annotations

from rxllm import Content, Part

__all__ = ["model", "user"]


def user(*parts: Part) -> Content:
    """A ``user`` turn of ``parts``."""
    return Content(role="user", parts=parts)


def model(*parts: Part) -> Content:
    """A ``model`` turn of ``parts``."""
    return Content(role="model", parts=parts)
