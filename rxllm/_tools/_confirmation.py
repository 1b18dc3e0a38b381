"""``ToolConfirmation``: a tool call waiting for a person's yes or no (human in the loop).

ADK Java's ``events/ToolConfirmation`` and the ``adk_request_confirmation`` protocol of its
``flows/llmflows/Functions`` and ``RequestConfirmationLlmRequestProcessor``:

1. A tool (``tool_context.request_confirmation(hint)``, or a :class:`FunctionTool` made with
   ``require_confirmation=True``) or a before-tool callback asks for confirmation of the call it
   answers. The request is recorded in ``actions.requested_tool_confirmations`` (function-call id
   to a ``ToolConfirmation`` carrying the hint and payload).
2. The agent runtime stores and emits, before that call's function-response event, an event with
   one ``adk_request_confirmation`` function call per request, whose arguments are
   ``{"originalFunctionCall": <the call>, "toolConfirmation": <the request>}``; those calls are
   long-running (``event.long_running_tool_ids``).
3. The client answers with a user message holding a function response named
   ``adk_request_confirmation`` with that call's id, whose response is a ``ToolConfirmation``
   (``{"confirmed": true, "payload": ...}``) or ``{"response": "<ToolConfirmation as JSON>"}``.
4. The next run of the agent runs the original call again with ``tool_context.tool_confirmation``
   set: the tool runs when ``confirmed``, and answers an error when not.

>>> ToolConfirmation(hint="Delete 3 files?").to_json()
'{"hint":"Delete 3 files?","confirmed":false}'
>>> confirmation_from_response({"response": '{"confirmed": true}'}).confirmed
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, JsonValue, ValidationError

from .._core.types import _Model

__all__ = [
    "REQUEST_CONFIRMATION_FUNCTION_CALL_NAME",
    "ToolConfirmation",
    "confirmation_from_response",
]

REQUEST_CONFIRMATION_FUNCTION_CALL_NAME = "adk_request_confirmation"
"""The name of the function call that asks the client to confirm a tool call (ADK's)."""


class ToolConfirmation(_Model):
    """A request for, or an answer to, the confirmation of one tool call (ADK Java's ``ToolConfirmation``).

    Attributes:
        hint: what the person is asked, for the client to show.
        confirmed: the answer: True runs the call, False refuses it.
        payload: any JSON the tool asks for along with the answer (ADK's structured confirmation).
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        **{**_Model.model_config, "extra": "ignore"}
    )  # a client's extra keys are not an error (as ADK's)

    hint: str = ""
    confirmed: bool = False
    payload: JsonValue | None = None


def confirmation_from_response(response: Mapping[str, Any]) -> ToolConfirmation | None:
    """The ``ToolConfirmation`` a client's ``adk_request_confirmation`` function response carries.

    As ADK Java's ``maybeCreateToolConfirmationEntry``: a response with the single key
    ``"response"`` holds the confirmation as a JSON string; any other response is the
    confirmation's fields. None when it is neither.
    """
    try:
        if set(response) == {"response"}:
            text = response["response"]
            if not isinstance(text, str):
                return None
            return ToolConfirmation.model_validate(json.loads(text))
        return ToolConfirmation.model_validate(dict(response))
    except (ValidationError, ValueError, TypeError):
        return None
