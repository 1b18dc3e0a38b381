"""What an MCP server may ask its client, answered for a toolset (imported only when a toolset connects).

* ``sampling/createMessage`` goes to the model of the agent using the toolset (the agent whose
  model call last listed its tools, see ``McpToolset``): the messages become the request's
  contents, ``systemPrompt`` its system instruction, ``maxTokens`` / ``temperature`` /
  ``stopSequences`` its config; the model's final text is the answer. Without such an agent,
  for content other than text, or when the model fails, the server gets an MCP error.
* ``elicitation/create`` and ``roots/list`` are refused with an MCP error (``INVALID_REQUEST``):
  there is no user to ask, and no roots to give.
* Log messages go to the ``rxllm.mcp`` logger at the matching level, the connection's secrets
  (header values, credential-named environment values) and every known key cut out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import mcp_types

from ..._core.errors import RxLlmError
from ..._core.redact import Redactor, is_secret_name
from ..._core.types import Content, GenerateContentConfig, LlmRequest, Part
from ..._rx.aio import last
from ._params import ConnectionParams, StdioServerParameters

__all__ = ["ClientRequests", "redactor_of"]

_log = logging.getLogger("rxllm.mcp")

_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def redactor_of(params: ConnectionParams) -> Redactor:
    """The secrets of a connection: credential header values, or credential-named environment values."""
    if isinstance(params, StdioServerParameters):
        env = params.env or {}
        return Redactor([value for name, value in env.items() if value and is_secret_name(name)])
    return Redactor.of_request(params.url, dict(params.headers or {}), params.secret_names)


def _refusal(message: str) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=message)


def _text_of(content: Any) -> str | None:
    items = content if isinstance(content, list) else [content]
    texts: list[str] = []
    for item in items:
        if not isinstance(item, mcp_types.TextContent):
            return None
        texts.append(item.text)
    return "".join(texts)


class ClientRequests:
    """The client side of one MCP session's server-to-client traffic (see the module docstring).

    Args:
        label: the toolset, for log lines.
        redactor: the connection's secrets.
        model_of: the model sampling asks (None: sampling is refused); read at each request.
    """

    def __init__(self, label: str, redactor: Redactor, model_of: Callable[[], Any]) -> None:
        self._label = label
        self._redactor = redactor
        self._model_of = model_of

    async def on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        """A server log message, on the ``rxllm.mcp`` logger with the secrets cut out."""
        level = _LOG_LEVELS.get(str(params.level), logging.INFO)
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        _log.log(
            level,
            "%s: server log (%s): %s",
            self._label,
            self._redactor.redact(params.logger or "-"),
            self._redactor.redact(data),
        )

    async def on_sampling(
        self, context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """``sampling/createMessage``: the agent's model answers (see the module docstring)."""
        try:
            model = self._model_of()
        except RxLlmError as exc:  # an agent whose model cannot be resolved
            return _refusal(f"sampling refused: {self._redactor.redact(str(exc))}")
        if model is None:
            return _refusal("sampling refused: the toolset is not used by an agent with a model")
        contents: list[Content] = []
        for message in params.messages:
            text = _text_of(message.content)
            if text is None:
                return mcp_types.ErrorData(
                    code=mcp_types.INVALID_PARAMS, message="sampling refused: only text content is supported"
                )
            role = "user" if message.role == "user" else "model"
            contents.append(Content(role=role, parts=(Part.from_text(text),)))
        config = GenerateContentConfig(
            system_instruction=params.system_prompt or None,
            temperature=params.temperature,
            max_output_tokens=params.max_tokens,
            stop_sequences=tuple(params.stop_sequences) if params.stop_sequences else None,
        )
        try:
            response = await last(model.generate_content(LlmRequest(contents=tuple(contents), config=config)))
        except Exception as exc:
            _log.warning("%s: sampling failed: %s", self._label, exc)
            return mcp_types.ErrorData(
                code=mcp_types.INTERNAL_ERROR, message=f"sampling failed: {self._redactor.redact(str(exc))}"
            )
        if response.error_code is not None and response.content is None:
            reason = response.error_message or str(response.error_code)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"sampling failed: {reason}")
        text = response.content.text() if response.content is not None else ""
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(text=text),
            model=str(getattr(model, "model", "") or "rxllm"),
            stop_reason="endTurn",
        )

    async def on_elicitation(self, context: Any, params: Any) -> mcp_types.ErrorData:
        """``elicitation/create``: refused (no user to ask)."""
        _log.info("%s: the server asked for elicitation; refused", self._label)
        return _refusal("elicitation is not supported by this client (an rxllm agent has no user to ask)")

    async def on_list_roots(self, context: Any) -> mcp_types.ErrorData:
        """``roots/list``: refused."""
        _log.info("%s: the server asked for roots; refused", self._label)
        return _refusal("roots are not supported by this client")
