"""Structured output on the stream contract: ``parsed`` on every response of a schema'd call.

Rules (tested in ``tests/test_structured_output.py``):

1. A partial keeps its text (only the new text, as always) and gets ``parsed`` = the object so
   far: the text so far parsed leniently as plain JSON data (a dict, or a list for a list schema).
   Until something parses, ``parsed`` is ``None``; a chunk after which the text does not parse
   (a half-written number or ``true``) repeats the last object, so ``parsed`` only grows.
2. The final gets ``parsed`` = the validated object (an instance of the class given). When its
   text is not JSON or does not validate, the final becomes an error final instead:
   ``error_code`` = ``INVALID_STRUCTURED_OUTPUT``, ``error_message`` says why, the raw text is
   kept in ``content``. Nothing is raised to the subscriber.
3. A final that already ended in error (``MAX_TOKENS``, a refusal, an in-band error) or that
   calls tools (a tool round, not the answer) is passed through, ``parsed`` unset.

The state lives in one :class:`StructuredStream` per subscription (``defer``); without a schema
none of this runs, so the plain text path costs nothing more per chunk.
"""

from __future__ import annotations

import reactivex
from pydantic import JsonValue
from reactivex import abc as rx_abc
from reactivex import operators as ops

from .._core.schema import INVALID_STRUCTURED_OUTPUT, OutputSchema, ResponseSchema, output_schema
from .._core.types import FinishReason, LlmResponse

__all__ = ["StructuredStream", "structured_responses"]

_MESSAGE_LIMIT = 500


class StructuredStream:
    """One stream's structured-output state (pure: no I/O, no Rx).

    >>> from rxllm import Content, LlmResponse, Part
    >>> stream = StructuredStream({"type": "object"})
    >>> def partial(text: str) -> LlmResponse:
    ...     return LlmResponse(content=Content(role="model", parts=[Part.from_text(text)]), partial=True)
    >>> stream.apply(partial('{"city": "Par')).parsed
    {'city': 'Par'}
    >>> stream.apply(partial('is"}')).parsed
    {'city': 'Paris'}
    """

    __slots__ = ("_last", "_schema", "_texts")

    def __init__(self, schema: ResponseSchema | OutputSchema) -> None:
        self._schema = schema if isinstance(schema, OutputSchema) else output_schema(schema)
        self._texts: list[str] = []
        self._last: JsonValue | None = None

    def apply(self, response: LlmResponse) -> LlmResponse:
        """The response with ``parsed`` set (rules 1-3 of the module docstring)."""
        if response.partial:
            delta = response.text()
            if delta:
                self._texts.append(delta)
                so_far = self._schema.parse_partial("".join(self._texts))
                if so_far is not None:
                    self._last = so_far
            return response.model_copy(update={"parsed": self._last})
        return self.finish(response)

    def finish(self, final: LlmResponse) -> LlmResponse:
        """The final with the validated object, or an error final when the text does not validate."""
        if final.error_code is not None or final.function_calls():
            return final
        try:
            value = self._schema.parse(final.text())
        except ValueError as exc:  # not JSON, or pydantic's ValidationError (a ValueError)
            detail = str(exc)
            if len(detail) > _MESSAGE_LIMIT:
                detail = detail[:_MESSAGE_LIMIT] + "..."
            return final.model_copy(update={
                "error_code": FinishReason(INVALID_STRUCTURED_OUTPUT),
                "error_message": f"the reply does not match the response schema {self._schema.name}: {detail}",
            })
        return final.model_copy(update={"parsed": value})


def structured_responses(
    source: reactivex.Observable[LlmResponse], schema: ResponseSchema
) -> reactivex.Observable[LlmResponse]:
    """``source``'s responses with ``parsed`` set, with a fresh :class:`StructuredStream` per subscription.

    The one function to call wherever a response schema applies (models, ``AiService``'s
    ``output_type``, an agent's ``output_schema``). Subscribing subscribes to ``source``;
    disposing disposes it (nothing is added between them but a synchronous map).
    """
    resolved = output_schema(schema)

    def fresh(_: rx_abc.SchedulerBase | None) -> reactivex.Observable[LlmResponse]:
        return source.pipe(ops.map(StructuredStream(resolved).apply))

    return reactivex.defer(fresh)
