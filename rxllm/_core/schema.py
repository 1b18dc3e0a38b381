"""Structured output: a response schema resolved once, and the parsers of a structured stream.

``GenerateContentConfig.response_schema`` takes a pydantic model class, any type a pydantic
``TypeAdapter`` handles (``list[Order]``, a ``TypedDict``, a dataclass, a union) or a JSON Schema
dict. :func:`output_schema` resolves it (cached per type) into an :class:`OutputSchema`:

* ``object_schema()``: what providers are sent. Provider structured modes want an object at the
  top level, so a schema that is not an object (a list, a union, a scalar) is wrapped as
  ``{"type": "object", "properties": {"items": ...}, "required": ["items"]}`` and unwrapped on parse,
  for every provider alike.
* ``strict_schema()``: the same made strict-compatible (OpenAI's ``strict: true`` and Anthropic's
  rules): every object gets ``additionalProperties: false`` and lists every property as required;
  a property that was optional becomes nullable; ``$ref`` with siblings is inlined; ``None``
  defaults are dropped.
* ``parse(text)``: the validated object (an instance of the class given; plain JSON for a dict
  schema, which is not validated beyond being JSON).
* ``parse_partial(text)``: the object so far as plain JSON data, parsed leniently
  (``pydantic_core.from_json(..., allow_partial="trailing-strings")``): incomplete strings and
  lists allowed, fields appearing as they arrive; ``None`` while nothing parses yet.

:class:`StructuredStream` applies them to one stream of ``LlmResponse`` s (one per subscription):
each partial gets ``parsed`` = the object so far, the final gets the validated instance, or
becomes an error final (``error_code`` = :data:`INVALID_STRUCTURED_OUTPUT`, raw text kept) when its
text does not validate. Re-parsing the text so far on every partial costs O(text) per chunk, so
O(n^2) over a reply; structured replies are small (see ``benchmarks/bench_structured.py``).
"""

from __future__ import annotations

import copy
import functools
from types import GenericAlias, UnionType
from typing import Any, TypeAlias, cast

import pydantic_core
from pydantic import JsonValue, TypeAdapter

from .errors import ConfigurationError

__all__ = ["INVALID_STRUCTURED_OUTPUT", "OutputSchema", "ResponseSchema", "output_schema", "type_adapter"]

ResponseSchema: TypeAlias = dict[str, JsonValue] | type[Any] | GenericAlias | UnionType
"""What ``response_schema`` / ``output_type`` take: a class, a generic alias, a union or a JSON Schema dict."""

INVALID_STRUCTURED_OUTPUT = "INVALID_STRUCTURED_OUTPUT"
"""``error_code`` of a final whose text is not valid JSON for, or does not validate against, the schema."""

_WRAPPER_KEY = "items"


class OutputSchema:
    """A response schema resolved once (see the module docstring)."""

    __slots__ = ("_adapter", "_partial", "json_schema", "name", "schema", "wrapped")

    def __init__(self, schema: ResponseSchema) -> None:
        self.schema: ResponseSchema = schema
        if isinstance(schema, dict):
            self._adapter: TypeAdapter[Any] | None = None
            self.json_schema: dict[str, JsonValue] = schema
            title = schema.get("title")
            self.name: str = _schema_name(title if isinstance(title, str) else "response")
        else:
            try:
                self._adapter = type_adapter(schema)
                self.json_schema = self._adapter.json_schema()
            except Exception as exc:  # pydantic raises several kinds for a type it cannot handle
                raise ConfigurationError(f"response_schema {schema!r} has no JSON schema: {exc}") from exc
            self.name = _schema_name(str(getattr(schema, "__name__", "response")))
        self.wrapped: bool = self.json_schema.get("type") != "object"

    def object_schema(self) -> dict[str, JsonValue]:
        """The schema providers are sent: the JSON schema, wrapped in an object when it is not one."""
        if not self.wrapped:
            return self.json_schema
        inner = dict(self.json_schema)
        defs = inner.pop("$defs", None)
        wrapper: dict[str, JsonValue] = {"type": "object", "properties": {_WRAPPER_KEY: inner},
                                         "required": [_WRAPPER_KEY]}
        if defs is not None:
            wrapper["$defs"] = defs
        return wrapper

    def strict_schema(self) -> dict[str, JsonValue]:
        """:meth:`object_schema` made strict-compatible (a new dict; the schema is not changed)."""
        root = copy.deepcopy(self.object_schema())
        return cast(dict[str, JsonValue], _strict(root, root))

    def parse(self, text: str) -> Any:
        """The validated object of a complete reply.

        Raises:
            ValueError: the text is not JSON (pydantic's ``ValidationError`` is a ``ValueError``
                too: the JSON does not validate).
        """
        data = pydantic_core.from_json(text)
        if self.wrapped:
            if not isinstance(data, dict) or _WRAPPER_KEY not in data:
                raise ValueError(f"expected an object with {_WRAPPER_KEY!r}")
            data = data[_WRAPPER_KEY]
        return data if self._adapter is None else self._adapter.validate_python(data)

    def parse_partial(self, text: str) -> JsonValue | None:
        """The object so far, as plain JSON data; ``None`` while nothing parses yet."""
        try:
            data = pydantic_core.from_json(text, allow_partial="trailing-strings")
        except ValueError:
            return None
        if self.wrapped:
            inner = data.get(_WRAPPER_KEY) if isinstance(data, dict) else None
            if self.json_schema.get("type") == "array" and not isinstance(inner, list):
                return None  # never a value of the wrong JSON type
            return inner
        return data if isinstance(data, dict) else None


def _schema_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
    return cleaned or "response"


@functools.lru_cache(maxsize=256)
def _cached_adapter(schema: type[Any] | GenericAlias | UnionType) -> TypeAdapter[Any]:
    return TypeAdapter(cast(Any, schema))


def type_adapter(schema: Any) -> TypeAdapter[Any]:
    """pydantic's ``TypeAdapter`` of ``schema``, built once per type (the one :class:`OutputSchema`
    uses, bounded to 256 types); an unhashable type form gets a new one each call.

    Raises:
        Exception: what ``TypeAdapter`` raises for a type it cannot handle (not cached).
    """
    try:
        return _cached_adapter(schema)
    except TypeError:
        if _hashable(schema):
            raise  # pydantic's own error for a type it cannot handle (a TypeError too)
        return TypeAdapter(schema)  # an unhashable type form: built without the cache


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@functools.lru_cache(maxsize=256)
def _cached(schema: type[Any] | GenericAlias | UnionType) -> OutputSchema:
    return OutputSchema(schema)


def output_schema(schema: ResponseSchema) -> OutputSchema:
    """Resolve ``schema`` (cached for types; a dict is resolved each call, cheaply)."""
    if isinstance(schema, dict):
        return OutputSchema(schema)
    try:
        return _cached(cast(Any, schema))
    except TypeError:  # an unhashable type form: resolve without the cache
        return OutputSchema(schema)


def is_schema_form(value: object) -> bool:
    """Whether ``value`` can be a response schema (a dict, a class, a generic alias, a union)."""
    return isinstance(value, dict | type | GenericAlias | UnionType) or hasattr(value, "__origin__")


def _strict(node: Any, root: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return node
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            for name, sub in defs.items():
                defs[name] = _strict(sub, root)
    if node.get("type") == "object":
        node.setdefault("additionalProperties", False)
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = set(node.get("required") or ())
        for name, sub in properties.items():
            sub = _strict(sub, root)
            if name not in required and not _nullable(sub):
                sub = {"anyOf": [sub, {"type": "null"}]}
            properties[name] = sub
        node["required"] = list(properties)
    items = node.get("items")
    if isinstance(items, dict):
        node["items"] = _strict(items, root)
    for key in ("anyOf", "allOf", "oneOf"):
        variants = node.get(key)
        if isinstance(variants, list):
            node[key] = [_strict(v, root) for v in variants]
    if "default" in node and node["default"] is None:
        del node["default"]
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1 and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        merged = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
        return _strict(merged, root)
    return node


def _nullable(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "null" or (isinstance(schema.get("type"), list) and "null" in schema["type"]):
        return True
    variants = schema.get("anyOf")
    return isinstance(variants, list) and any(isinstance(v, dict) and v.get("type") == "null" for v in variants)




class _SchemaField:
    """Pydantic metadata of ``response_schema``: a JSON Schema dict, or a type kept as given;
    JSON output is always the JSON schema."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> pydantic_core.CoreSchema:
        from pydantic_core import core_schema

        json_object = handler.generate_schema(dict[str, JsonValue])

        def validate(value: object) -> object:
            if isinstance(value, dict):
                return value
            if is_schema_form(value):
                output_schema(value)  # type: ignore[arg-type]  # fails early, naming the type
                return value
            raise ValueError("response_schema must be a JSON Schema dict, a class or a type form such as list[X]")

        def serialize(value: object) -> object:
            return value if isinstance(value, dict) else output_schema(value).json_schema  # type: ignore[arg-type]

        return core_schema.json_or_python_schema(
            json_schema=json_object,
            python_schema=core_schema.no_info_plain_validator_function(validate),
            serialization=core_schema.plain_serializer_function_ser_schema(serialize, when_used="json"),
        )

    def __get_pydantic_json_schema__(self, _core: Any, _handler: Any) -> dict[str, Any]:
        return {"type": "object"}


SCHEMA_FIELD = _SchemaField()
