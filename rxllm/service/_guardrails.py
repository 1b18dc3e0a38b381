"""Output guardrails: checks that accept, rewrite or reject the final answer before it is emitted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from .._core.errors import ConfigurationError, GuardrailError
from .._core.types import Content, LlmResponse, Part

__all__ = ["OutputGuardrail", "apply_output_guardrails", "check_guardrails", "with_answer_text"]

OutputGuardrail = Callable[[LlmResponse], "LlmResponse | str | Awaitable[LlmResponse | str | None] | None"]
"""An output guardrail: called with the final response (after the guardrails before it).

Return ``None`` to accept it, a ``str`` to rewrite the answer text (thought parts and everything
else are kept), or an ``LlmResponse`` to replace it. Raise :class:`~rxllm.GuardrailError` to
reject it; any other exception is a rejection too (wrapped in a ``GuardrailError``). It may be
``async def``: awaited on the loop the stream was subscribed from (else rxllm's tool loop).
"""


def check_guardrails(guardrails: Sequence[OutputGuardrail]) -> tuple[OutputGuardrail, ...]:
    """The guardrails as a tuple.

    Raises:
        ConfigurationError: when one is not callable.
    """
    out = tuple(guardrails)
    for guardrail in out:
        if not callable(guardrail):
            raise ConfigurationError(f"output guardrails must be callables, got {type(guardrail).__name__}")
    return out


def with_answer_text(response: LlmResponse, text: str) -> LlmResponse:
    """``response`` with its answer text replaced by ``text``, where the first answer text part stood.

    >>> r = LlmResponse(content=Content(role="model", parts=(Part(text="hmm", thought=True), Part(text="Hi"))))
    >>> rewritten = with_answer_text(r, "Hello")
    >>> rewritten.text(), rewritten.thought_text()
    ('Hello', 'hmm')
    """
    content = response.content or Content(role="model")
    parts: list[Part] = []
    placed = False
    for part in content.parts:
        if part.text is not None and not part.thought and part.function_call is None:
            if not placed:
                parts.append(Part(text=text))
                placed = True
            continue
        parts.append(part)
    if not placed:
        parts.append(Part(text=text))
    return response.model_copy(update={"content": content.model_copy(update={"parts": tuple(parts)})})


def apply_output_guardrails(
    guardrails: Sequence[OutputGuardrail],
    response: LlmResponse,
    resolve: Callable[[object], object] = lambda value: value,
) -> LlmResponse:
    """Run the guardrails in order; each sees what the previous one let through.

    ``resolve`` turns what a guardrail returned into its answer (the service waits there for an
    ``async def`` guardrail's coroutine).

    Raises:
        GuardrailError: a guardrail rejected the answer (or raised, or returned something else).
    """
    for guardrail in guardrails:
        name = getattr(guardrail, "__name__", None) or type(guardrail).__name__
        try:
            result = resolve(guardrail(response))
        except GuardrailError:
            raise
        except Exception as exc:
            raise GuardrailError(f"output guardrail {name!r} rejected the answer: {type(exc).__name__}: {exc}") from exc
        if result is None:
            continue
        if isinstance(result, str):
            response = with_answer_text(response, result)
        elif isinstance(result, LlmResponse):
            response = result.model_copy(update={"partial": None})
        else:
            raise GuardrailError(
                f"output guardrail {name!r} returned {type(result).__name__}; expected None (accept), a str "
                "(rewrite) or an LlmResponse (replace)"
            )
    return response
