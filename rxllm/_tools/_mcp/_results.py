"""An MCP ``CallToolResult`` as a function response, as ADK Java's ``AbstractMcpTool.wrapCallResult`` maps it.

* ``isError: true``: the call fails with :class:`~rxllm.ToolError` whose message carries the
  result's text (``"Tool execution failed. Details: ..."`` in ADK), so the model sees
  ``{"error": "..."}`` and the agent's ``on_tool_error_callback`` runs.
* Otherwise ``{"text_output": [...]}`` with one entry per content block, in order: a text block
  that is a JSON object becomes that object, other text ``{"text": ...}`` (ADK's shape). rxllm
  adds the blocks ADK reports as unsupported: an image or audio block becomes
  ``{"image": {"mime_type": ..., "size_bytes": n}}`` (``"audio"`` likewise; the base64 data is
  not put into the model's context), an embedded resource ``{"resource": {"uri", "mime_type",
  "text"}}`` (a binary one with ``size_bytes`` instead of ``text``), a resource link
  ``{"resource_link": {"uri", "name", ...}}``.
* ``structuredContent`` is added as ``"structured_content"``; a result with no content and no
  structured content is ``{}``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..._core.errors import ToolError

__all__ = ["function_response_of"]

_ERROR_TEXT_LIMIT = 4000


def _size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _entry(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text", "")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        return parsed if isinstance(parsed, dict) else {"text": text}
    if kind in ("image", "audio"):
        return {kind: {"mime_type": block.get("mimeType"), "size_bytes": _size(block.get("data"))}}
    if kind == "resource":
        resource = dict(block.get("resource") or {})
        out: dict[str, Any] = {"uri": resource.get("uri"), "mime_type": resource.get("mimeType")}
        if "text" in resource:
            out["text"] = resource["text"]
        else:
            out["size_bytes"] = _size(resource.get("blob"))
        return {"resource": out}
    if kind == "resource_link":
        keep = ("uri", "name", "title", "description", "mimeType", "size")
        return {"resource_link": {key: block[key] for key in keep if block.get(key) is not None}}
    return {"unsupported_content": kind}


def function_response_of(tool_name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The function response for ``result`` (a ``CallToolResult`` dumped by alias: ``isError``...)."""
    blocks = [block for block in result.get("content") or () if isinstance(block, dict)]
    if result.get("isError"):
        texts = [block.get("text", "") for block in blocks if block.get("type") == "text"]
        detail = "\n".join(t for t in texts if t)[:_ERROR_TEXT_LIMIT]
        message = f"MCP tool {tool_name!r}: Tool execution failed."
        raise ToolError(f"{message} Details: {detail}" if detail else message)
    response: dict[str, Any] = {}
    if blocks:
        response["text_output"] = [_entry(block) for block in blocks]
    structured = result.get("structuredContent")
    if structured is not None:
        response["structured_content"] = structured
    return response
