"""Short prompts: a plain string (or a list of ``Content``) where a request or a message is taken.

``model.generate_content("Hello!")`` means ``LlmRequest(contents=[Content(role="user",
parts=[Part.from_text("Hello!")])])``, as the openai SDK's ``input="Hello!"`` and pydantic-ai's
``agent.run("Hello!")`` do. :class:`~rxllm.BaseLlm` converts the request of every model's
``generate_content`` and ``stream_events`` with :func:`as_request`; the agents' ``Runner`` and
the service convert a message with :func:`as_user_content`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from .._core.errors import ConfigurationError
from .._core.types import Content, GenerateContentConfig, LlmRequest, Part

__all__ = ["Prompt", "as_request", "as_user_content"]

Prompt: TypeAlias = LlmRequest | str | Sequence[Content]
"""What a model is asked: an :class:`~rxllm.LlmRequest`, the user's text, or the conversation so far."""


def as_user_content(message: Content | str) -> Content:
    """``message`` as a user turn: a ``str`` becomes one text part; a ``Content`` without a role gets ``user``.

    Raises:
        ConfigurationError: ``message`` is neither a ``str`` nor a ``Content``.

    >>> as_user_content("Hi").to_json()
    '{"role":"user","parts":[{"text":"Hi"}]}'
    """
    if isinstance(message, str):
        return Content(role="user", parts=(Part(text=message),))
    if isinstance(message, Content):
        return message if message.role is not None else message.model_copy(update={"role": "user"})
    raise ConfigurationError(f"a message must be a str or a Content, got {type(message).__name__}")


def as_request(prompt: Prompt, config: GenerateContentConfig | None = None) -> LlmRequest:
    """``prompt`` as an :class:`~rxllm.LlmRequest` (itself when it is one and ``config`` is ``None``).

    Args:
        prompt: a request; a ``str`` (one user turn); or a sequence of ``Content`` (the
            conversation, in order; a turn without a role is the user's).
        config: the generation config; with a request, it replaces the request's own.

    Raises:
        ConfigurationError: ``prompt`` is none of these (a sequence holding something other
            than ``Content`` included).

    >>> as_request("Hello!").contents[0].text()
    'Hello!'
    """
    if isinstance(prompt, LlmRequest):
        return prompt if config is None else prompt.model_copy(update={"config": config})
    if isinstance(prompt, str):
        contents: tuple[Content, ...] = (as_user_content(prompt),)
    elif isinstance(prompt, Sequence):
        for index, item in enumerate(prompt):
            if not isinstance(item, Content):
                raise ConfigurationError(
                    f"a prompt given as a sequence must hold Content, got {type(item).__name__} at index {index}"
                )
        contents = tuple(as_user_content(item) for item in prompt)
    else:
        raise ConfigurationError(
            f"a prompt must be an LlmRequest, a str or a sequence of Content, got {type(prompt).__name__}"
        )
    return LlmRequest(contents=contents, config=config or GenerateContentConfig())
