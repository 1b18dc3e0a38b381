"""The stream contract of ADK Java's model layer (``BaseLlm.generateContent``) as reusable assertions."""

from __future__ import annotations

from collections.abc import Sequence

from .._core.types import LlmResponse

__all__ = ["assert_stream_protocol"]


def assert_stream_protocol(responses: Sequence[LlmResponse]) -> LlmResponse:
    """Assert that ``responses`` follow the ``generate_content(stream=True)`` contract.

    The invariants: there is exactly one final response (``partial`` unset) and it is the
    last; when there are partials, their answer text concatenates to the final's answer text and
    their thought text to the final's thought text (a lone final, as with ``stream=False`` or
    when partials are suppressed, is the whole turn); no partial carries function calls or usage.

    Returns:
        The final response, for further assertions.

    Raises:
        AssertionError: naming the first broken invariant.

    >>> from rxllm import Chunk, LlmResponse
    >>> from rxllm.testing import assert_stream_protocol, scripted_turn
    >>> assert_stream_protocol(scripted_turn(Chunk(text_delta="Hi"), Chunk(text_delta="!"))).text()
    'Hi!'
    >>> assert_stream_protocol([LlmResponse(partial=True)])
    Traceback (most recent call last):
    AssertionError: no final response: the last response is partial (a stream must end with exactly one final aggregate)
    """
    if not responses:
        raise AssertionError("no responses at all: a stream must end with exactly one final aggregate")
    last = responses[-1]
    if last.partial:
        raise AssertionError(
            "no final response: the last response is partial "
            "(a stream must end with exactly one final aggregate)"
        )
    partials = responses[:-1]
    for i, response in enumerate(partials):
        if not response.partial:
            raise AssertionError(
                f"response #{i} of {len(responses)} is final but is not the last: only the last response "
                "may be final (exactly one final aggregate per stream)"
            )
    for i, response in enumerate(partials):
        if response.function_calls():
            raise AssertionError(
                f"partial #{i} carries function calls: calls belong on the final only "
                "(a tool must run once, with its whole arguments)"
            )
        if response.usage_metadata is not None:
            raise AssertionError(
                f"partial #{i} carries usage: usage belongs on the final only (dashboards would count it twice)"
            )
    if not partials:  # zero partials is allowed: the final alone is the whole turn (nothing to compare)
        return last
    text = "".join(r.text() for r in partials)
    if text != last.text():
        raise AssertionError(
            "the partials' text does not concatenate to the final's text (does the final hold the whole "
            f"turn, not only the last delta?): partials {_clip(text)!r}, final {_clip(last.text())!r}"
        )
    thought = "".join(r.thought_text() for r in partials)
    if thought != last.thought_text():
        raise AssertionError(
            "the partials' thought text does not concatenate to the final's thought text: "
            f"partials {_clip(thought)!r}, final {_clip(last.thought_text())!r}"
        )
    return last


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]
