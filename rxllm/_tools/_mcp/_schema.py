"""An MCP tool's ``inputSchema`` as a :class:`~rxllm.FunctionDeclaration`'s ``parameters``.

rxllm's providers send ``parameters`` as JSON Schema (Gemini's ``parametersJsonSchema``, OpenAI's
and Anthropic's function schemas), so a schema is passed on unchanged where it fits. The mapping,
for what does not:

* ``$schema``, ``$id`` and ``$comment`` at the top level are dropped (metadata some model APIs
  refuse); a missing ``"type"`` becomes ``"object"``, a missing ``properties`` ``{}``.
* Local ``$ref`` (``#/$defs/...``, ``#/definitions/...``), ``anyOf`` / ``oneOf`` / ``allOf``
  and ``additionalProperties`` are kept as they are: every provider takes them.
* A ``$ref`` that points outside the schema (a URL), a top-level type other than ``object``, or a
  schema that is not a JSON object makes the tool unusable: :func:`parameters_of` raises
  :class:`~rxllm.ConfigurationError` and the toolset leaves that tool out (with a warning), the
  other tools stay.
"""

from __future__ import annotations

from typing import Any

from ..._core.errors import ConfigurationError

__all__ = ["parameters_of"]

_DROPPED = ("$schema", "$id", "$comment")


def _external_ref(node: Any) -> str | None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return ref
        for value in node.values():
            found = _external_ref(value)
            if found is not None:
                return found
    elif isinstance(node, list):
        for value in node:
            found = _external_ref(value)
            if found is not None:
                return found
    return None


def parameters_of(name: str, input_schema: Any) -> dict[str, Any]:
    """The ``parameters`` of tool ``name`` (see the module docstring for the mapping)."""
    if input_schema is None:
        return {"type": "object", "properties": {}}
    if not isinstance(input_schema, dict):
        raise ConfigurationError(f"MCP tool {name!r}: its inputSchema is not a JSON object")
    schema = {key: value for key, value in input_schema.items() if key not in _DROPPED}
    kind = schema.setdefault("type", "object")
    if kind != "object":
        raise ConfigurationError(f"MCP tool {name!r}: its inputSchema has type {kind!r}; a model takes an object")
    if not isinstance(schema.setdefault("properties", {}), dict):
        raise ConfigurationError(f"MCP tool {name!r}: its inputSchema's properties are not an object")
    ref = _external_ref(schema)
    if ref is not None:
        raise ConfigurationError(f"MCP tool {name!r}: its inputSchema refers outside itself ($ref {ref!r})")
    return schema
