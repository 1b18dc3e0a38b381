"""``LlmRegistry``: a model given by name, resolved by registered patterns (ADK's ``models/LlmRegistry.java``).

Built in: ``gpt-.*`` and ``o[0-9].*`` → :class:`~rxllm.providers.openai.OpenAiChatModel`,
``claude-.*`` → :class:`~rxllm.providers.anthropic.AnthropicModel`, ``gemini-.*`` →
:class:`~rxllm.providers.gemini.GeminiModel`; each built with its provider's defaults (API key from
the environment). Patterns are regular expressions matched against the whole name; the pattern
registered last wins over earlier ones (a user's pattern overrides a built-in). Resolved models are
cached per name.

>>> from rxllm.testing import ScriptedLlm
>>> LlmRegistry.register_llm(r"scripted-.*", lambda name: ScriptedLlm([], model=name))
>>> LlmRegistry.get_llm("scripted-1").model
'scripted-1'
>>> LlmRegistry.get_llm("scripted-1") is LlmRegistry.get_llm("scripted-1")
True
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import ClassVar

from ..._core.errors import ConfigurationError
from ..._models.base_llm import BaseLlm

__all__ = ["LlmFactory", "LlmRegistry"]

LlmFactory = Callable[[str], BaseLlm]
"""Builds the model for a name the factory's pattern matched."""


def _openai(name: str) -> BaseLlm:
    from ...providers.openai import OpenAiChatModel

    return OpenAiChatModel(name)


def _anthropic(name: str) -> BaseLlm:
    from ...providers.anthropic import AnthropicModel

    return AnthropicModel(name)


def _gemini(name: str) -> BaseLlm:
    from ...providers.gemini import GeminiModel

    return GeminiModel(name)


_BUILT_IN: tuple[tuple[str, LlmFactory], ...] = (
    ("gpt-.*", _openai),
    ("o[0-9].*", _openai),
    ("claude-.*", _anthropic),
    ("gemini-.*", _gemini),
)


class LlmRegistry:
    """Model names to models, by registered regular expressions (class-level, process-wide, as ADK's)."""

    _lock = threading.Lock()
    _factories: ClassVar[dict[str, tuple[re.Pattern[str], LlmFactory]]] = {p: (re.compile(p), f) for p, f in _BUILT_IN}
    _instances: ClassVar[dict[str, BaseLlm]] = {}

    @classmethod
    def register_llm(cls, pattern: str, factory: LlmFactory) -> None:
        """Resolve names that fully match ``pattern`` with ``factory`` (later registrations win).

        Re-registering a pattern replaces its factory. Cached models of names the pattern matches
        are dropped, so the next :meth:`get_llm` builds them with the new factory.

        Raises:
            ConfigurationError: for a pattern that is not a valid regular expression, or a factory
                that is not callable.
        """
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ConfigurationError(f"LlmRegistry pattern {pattern!r} is not a regular expression: {exc}") from exc
        if not callable(factory):
            raise ConfigurationError(f"LlmRegistry factory for {pattern!r} must be callable")
        with cls._lock:
            cls._factories.pop(pattern, None)
            cls._factories[pattern] = (compiled, factory)
            for name in [n for n in cls._instances if compiled.fullmatch(n)]:
                del cls._instances[name]

    @classmethod
    def get_llm(cls, model_name: str) -> BaseLlm:
        """The model for ``model_name``: built by the last registered pattern that matches it, then cached.

        Raises:
            ConfigurationError: no pattern matches (the message lists them), or the factory failed
                or returned something that is not a :class:`~rxllm.BaseLlm`.
        """
        with cls._lock:
            cached = cls._instances.get(model_name)
            if cached is not None:
                return cached
            factories = list(cls._factories.items())
        for pattern, (compiled, factory) in reversed(factories):
            if compiled.fullmatch(model_name):
                try:
                    model = factory(model_name)
                except ConfigurationError:
                    raise
                except Exception as exc:
                    raise ConfigurationError(
                        f"the LlmRegistry factory for pattern {pattern!r} failed for {model_name!r}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                if not isinstance(model, BaseLlm):
                    raise ConfigurationError(
                        f"the LlmRegistry factory for pattern {pattern!r} returned {type(model).__name__}, "
                        "not a BaseLlm"
                    )
                with cls._lock:
                    return cls._instances.setdefault(model_name, model)
        known = ", ".join(pattern for pattern, _ in factories)
        raise ConfigurationError(
            f"no model is registered for {model_name!r}; registered patterns: {known} "
            "(register one with LlmRegistry.register_llm(pattern, factory))"
        )

    @classmethod
    def patterns(cls) -> tuple[str, ...]:
        """The registered patterns, oldest first."""
        with cls._lock:
            return tuple(cls._factories)
