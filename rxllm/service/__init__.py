"""rxllm.service: a tool-using turn as one typed Observable (LangChain4j's streaming AI service).

:class:`AiService` streams one interaction as :data:`AiServiceStreamingEvent` s: retrieved
contents, partial thinking / response / tool-call events as the model streams, complete tool calls
whose tools start at once (eager tools, on a tool scheduler), before/after tool-execution events,
one intermediate response per tool round, and exactly one final response, last. :func:`to_text`
turns the events into the answer's text.

>>> from reactivex import operators as ops
>>> from rxllm import Chunk, ToolCallFragment
>>> from rxllm.service import AiService, to_text
>>> from rxllm.testing import ScriptedLlm, scripted_turn
>>> def get_order(order_id: str) -> dict[str, str]:
...     '''Look an order up by its id.'''
...     return {"order_id": order_id, "status": "shipped Tuesday"}
>>> model = ScriptedLlm([
...     scripted_turn(Chunk(text_delta="Let me check. "),
...                   Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", "get_order", '{"order_id":"A17"}'),))),
...     scripted_turn(Chunk(text_delta="It shipped "), Chunk(text_delta="Tuesday.")),
... ])
>>> service = AiService(model, tools=[get_order], system_message="Be brief.")
>>> "".join(to_text(service.stream("Where is order A17?"), service.has_output_guardrails).pipe(ops.to_list()).run())
'Let me check. It shipped Tuesday.'
"""

# Layering (docs/architecture.md): this package imports _core, _rx, _telemetry, _models and the tool layer (_tools),
# never rxllm.agents: the two runtimes stand side by side on the tool layer.

from .._core.public import publish as _publish
from ._events import (
    AfterToolExecutionEvent,
    AiServiceStreamingEvent,
    BeforeToolExecutionEvent,
    CompleteToolCallEvent,
    FinalResponseEvent,
    IntermediateResponseEvent,
    PartialResponseEvent,
    PartialThinkingEvent,
    PartialToolCallEvent,
    RetrievedContentsEvent,
)
from ._guardrails import OutputGuardrail
from ._interaction import Retriever
from ._service import DEFAULT_BUFFER_SIZE, DEFAULT_MAX_ROUNDS, AiService
from ._text import to_text

__all__ = [
    "AfterToolExecutionEvent",
    "AiService",
    "AiServiceStreamingEvent",
    "BeforeToolExecutionEvent",
    "CompleteToolCallEvent",
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_MAX_ROUNDS",
    "FinalResponseEvent",
    "IntermediateResponseEvent",
    "OutputGuardrail",
    "PartialResponseEvent",
    "PartialThinkingEvent",
    "PartialToolCallEvent",
    "RetrievedContentsEvent",
    "Retriever",
    "to_text",
]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
