"""Few-shot examples for the system instruction: ``Example``, ``BaseExampleProvider``,
``build_example_si`` and ``ExampleTool`` (ADK Java's ``examples.Example``,
``examples.BaseExampleProvider``, ``examples.ExampleUtils.buildExampleSi`` and ``tools.ExampleTool``).

``ExampleTool`` is never offered to the model (it has no declaration): before every model call
its :meth:`~ExampleTool.process_llm_request` appends the examples block to the system
instruction, when the user's message has text. The block's text is ADK Java's, byte for byte:

>>> from rxllm import Content, Part
>>> example = Example(
...     input=Content(role="user", parts=(Part.from_text("Roll a 6-sided die."),)),
...     output=(Content(role="model", parts=(Part.from_function_call("roll_die", {"sides": 6}),)),
...             Content(role="model", parts=(Part.from_text("I rolled a 4 for you."),))))
>>> print(build_example_si([example], "Roll a die."))
<EXAMPLES>
Begin few-shot
The following are examples of user queries and model responses using the available tools.
<BLANKLINE>
EXAMPLE 1:
Begin example
[user]
Roll a 6-sided die.
<BLANKLINE>
[model]
```tool_code
roll_die(sides=6)
```
[model]
I rolled a 4 for you.
End example
<BLANKLINE>
End few-shot
Now, try to follow these examples and complete the following conversation
<EXAMPLES>
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import reactivex
from pydantic import JsonValue

from .._core.errors import ConfigurationError, ToolError
from .._core.types import Content, LlmRequest, _Model
from .._rx.direct import fail_now
from ._context import ToolContext
from ._tool import BaseTool, ToolResult

__all__ = ["BaseExampleProvider", "Example", "ExampleTool", "Examples", "build_example_si"]

logger = logging.getLogger("rxllm.agents")

_EXAMPLES_INTRO = (
    "<EXAMPLES>\nBegin few-shot\nThe following are examples of user queries and model responses using the "
    "available tools.\n\n"
)
_EXAMPLES_END = "End few-shot\nNow, try to follow these examples and complete the following conversation\n<EXAMPLES>"
_EXAMPLE_START = "EXAMPLE {}:\nBegin example\n"
_EXAMPLE_END = "End example\n\n"
_USER_PREFIX = "[user]\n"
_MODEL_PREFIX = "[model]\n"
_FUNCTION_CALL_PREFIX = "```tool_code\n"
_FUNCTION_CALL_SUFFIX = "\n```\n"
_FUNCTION_RESPONSE_PREFIX = "```tool_outputs\n"
_FUNCTION_RESPONSE_SUFFIX = "\n```\n"


class Example(_Model):
    """One few-shot example: the user's message and what followed it (ADK's ``Example``).

    Attributes:
        input: the user's message (its first part's text is shown).
        output: the contents that answered it: text, function calls and function responses. A
            content whose role is ``"model"`` is shown as ``[model]``, any other as ``[user]``.
    """

    input: Content
    output: tuple[Content, ...] = ()


class BaseExampleProvider(abc.ABC):
    """Where an :class:`ExampleTool` gets its examples for a query (ADK's ``BaseExampleProvider``)."""

    @abc.abstractmethod
    def get_examples(self, query: str) -> Sequence[Example]:
        """The examples to show for the user's message ``query``."""


Examples = BaseExampleProvider | Callable[[str], Sequence[Example]] | Sequence[Example]
"""What ``ExampleTool`` and ``build_example_si`` take: a provider, a function of the query (ADK
Java's provider lambda, ``query -> examples``), or the examples themselves."""


class _FixedExamples(BaseExampleProvider):
    def __init__(self, examples: Sequence[Example]) -> None:
        self._examples = tuple(examples)

    def get_examples(self, query: str) -> Sequence[Example]:
        return self._examples


class _FunctionProvider(BaseExampleProvider):
    def __init__(self, function: Callable[[str], Sequence[Example]]) -> None:
        self._function = function

    def get_examples(self, query: str) -> Sequence[Example]:
        return self._function(query)


def _as_provider(examples: Examples, owner: str) -> BaseExampleProvider:
    if isinstance(examples, BaseExampleProvider):
        return examples
    if callable(examples):
        return _FunctionProvider(examples)
    if isinstance(examples, str | bytes) or not isinstance(examples, Sequence):
        raise ConfigurationError(
            f"{owner}: examples must be Example instances, a BaseExampleProvider or a function of the query, "
            f"got {type(examples).__name__}"
        )
    for item in examples:
        if not isinstance(item, Example):
            raise ConfigurationError(f"{owner}: examples must be Example instances, got {type(item).__name__}")
    return _FixedExamples(examples)


def _java_text(value: Any) -> str:
    """A JSON value as Java's ``String.valueOf`` shows the object Jackson reads it into."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(_java_text, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}={_java_text(item)}" for key, item in value.items()) + "}"
    return str(value)


def _call_text(name: str, args: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}='{v}'" if isinstance(v, str) else f"{k}={_java_text(v)}" for k, v in args.items())
    return f"{name}({shown})"


def _response_json(response: dict[str, JsonValue]) -> str:
    try:
        return json.dumps(response, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # NaN or infinity: what ADK Java logs and leaves empty
        logger.error("an example's function response is not JSON: %s", exc)
        return ""


def _examples_text(examples: Sequence[Example]) -> str:
    if not examples:
        return ""
    out = [_EXAMPLES_INTRO]
    for number, example in enumerate(examples, start=1):
        out.append(_EXAMPLE_START.format(number))
        first = example.input.parts[0] if example.input.parts else None
        if first is not None and first.text is not None:
            out.append(f"{_USER_PREFIX}{first.text}\n\n")
        for content in example.output:
            prefix = _MODEL_PREFIX if content.role == "model" else _USER_PREFIX
            for part in content.parts:
                if part.function_call is not None:
                    call = part.function_call
                    out.append(f"{prefix}{_FUNCTION_CALL_PREFIX}{_call_text(call.name, dict(call.args))}")
                    out.append(_FUNCTION_CALL_SUFFIX)
                elif part.function_response is not None:
                    text = _response_json(dict(part.function_response.response))
                    out.append(f"{_FUNCTION_RESPONSE_PREFIX}{text}{_FUNCTION_RESPONSE_SUFFIX}")
                elif part.text is not None:
                    out.append(f"{prefix}{part.text}\n")
        out.append(_EXAMPLE_END)
    out.append(_EXAMPLES_END)
    return "".join(out)


def build_example_si(examples: Examples, query: str) -> str:
    """The few-shot block for ``query`` ("example system instruction", ADK Java's
    ``ExampleUtils.buildExampleSi``); ``""`` when there are no examples.

    Args:
        examples: a provider or a function (asked with ``query``), or the examples themselves.
        query: the user's message.

    Raises:
        ConfigurationError: ``examples`` is none of those.
    """
    return _examples_text(tuple(_as_provider(examples, "build_example_si").get_examples(query)))


class ExampleTool(BaseTool):
    """Adds few-shot examples to every request's system instruction (ADK Java's ``ExampleTool``).

    Args:
        examples: the examples, or a :class:`BaseExampleProvider` (or a function of the query)
            asked with the user's message before every model call.
        name: the tool's name (``"example_tool"``, ADK's).
        description: its description (ADK's by default); the model never sees either.

    The block (:func:`build_example_si`) is appended to the system instruction, after a blank line,
    when the invocation's user message has text in its first part and there are examples; otherwise
    the request is left as it is.

    Raises:
        ConfigurationError: ``examples`` is not a sequence of :class:`Example`, a provider or a function.
    """

    def __init__(
        self,
        examples: Examples,
        *,
        name: str = "example_tool",
        description: str = "Adds few-shot examples to the request",
    ) -> None:
        super().__init__(name=name, description=description)
        self._provider = _as_provider(examples, f"ExampleTool {name!r}")

    @property
    def example_provider(self) -> BaseExampleProvider:
        """Where the examples come from (a fixed list is wrapped in a provider)."""
        return self._provider

    def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> LlmRequest | None:
        """The request with the examples block appended to its system instruction (see the class)."""
        content = tool_context.user_content
        first = content.parts[0] if content is not None and content.parts else None
        query = first.text if first is not None and first.text else ""
        if not query:
            return None
        block = build_example_si(self._provider, query)
        return llm_request.append_instructions(block) if block else None

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[ToolResult]:
        """Fails: the tool is never declared to the model, so a call to it is the model's mistake."""
        return fail_now(ToolError(f"tool {self.name!r} adds examples to the request and cannot be called"))

