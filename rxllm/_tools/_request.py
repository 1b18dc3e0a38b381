"""Request building both runtimes share: a request's config from a base config, an instruction and tools."""

from __future__ import annotations

from typing import Any

from .._core.types import Content, GenerateContentConfig, Part, Tool

__all__ = ["request_config"]


def request_config(
    base: GenerateContentConfig, system_instruction: str | None, tools: tuple[Tool, ...]
) -> GenerateContentConfig:
    """``base`` with the system instruction (unless None) and the tools' declarations (unless none).

    >>> from rxllm import GenerateContentConfig
    >>> config = request_config(GenerateContentConfig(temperature=0.5), "Be brief.", ())
    >>> config.temperature, config.system_instruction.parts[0].text, config.tools
    (0.5, 'Be brief.', None)
    """
    update: dict[str, Any] = {}
    if system_instruction is not None:
        update["system_instruction"] = Content(role="system", parts=(Part(text=system_instruction),))
    if tools:
        update["tools"] = tools
    return base.model_copy(update=update) if update else base
