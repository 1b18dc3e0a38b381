"""What every provider's chunk parser and request mapper needs to read and write its wire format.

Reading (the parsers): :class:`WireReader` decodes JSON through :mod:`rxllm._core.json_codec` and checks the
shape of what it decoded; bad JSON and every wrong shape become a :class:`~rxllm.ProtocolError`
that names the provider and where the value was found (``message_start.message should be an
object, got list``), never a foreign exception. :func:`in_band_error` reads the error objects of
the APIs whose error code alone says whether a retry can help.

Writing (the mappers): :class:`JsonRequestMapper`, the base of every request mapper (base URL,
key, extra headers and extra body, per model and per request, a repr that never shows a
credential, the JSON ``POST``); :func:`merge_extra_body`; :func:`tool_choice` (a request's
``tool_config`` read once, the same way for every provider); :func:`built_in_tools` and
:func:`refuse_built_in` (the built-in tools of a request, and the error for one a provider does
not run); :func:`check_gemini_only_options`; :func:`json_text`
(compact JSON of tool arguments and function responses); :func:`wire_config` (the sampling options
a request sets, under the API's names); :func:`system_text`; :func:`data_url`; and
:class:`CallIdPairing` (ids for the function calls that have none).

>>> reader = WireReader("toy")
>>> reader.string_at(reader.decode_object('{"text": "Hi"}', "event"), "text", "event")
'Hi'
>>> reader.string_at({"text": 3}, "text", "event")
Traceback (most recent call last):
...
rxllm.ProtocolError: [toy] event.text should be a string, got int
"""

from __future__ import annotations

import base64
import json
import logging
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, JsonValue

from .._core.errors import ConfigurationError, ProtocolError
from .._core.genai_types import FunctionCallingConfigMode, HarmBlockThreshold
from .._core.json_codec import loads
from .._core.redact import redact_headers, redact_json, redact_url, register_secrets_of
from .._core.types import BUILT_IN_TOOLS, FunctionDeclaration, GenerateContentConfig, HttpOptions, LlmRequest
from .._core.version import USER_AGENT
from .._models.chunk import InBandError
from .._transports.base import HttpRequest

__all__ = [
    "CallIdPairing",
    "ConfigField",
    "JsonRequestMapper",
    "KeptByConfig",
    "KeptJson",
    "ParametersSlot",
    "MAX_TOKEN_COUNT",
    "ToolChoice",
    "WireReader",
    "built_in_tools",
    "data_url",
    "in_band_error",
    "join_url",
    "body_json",
    "json_text",
    "kept_json",
    "kept_members",
    "render_kept",
    "merge_extra_body",
    "refuse_built_in",
    "check_gemini_only_options",
    "system_text",
    "tool_choice",
    "wire_config",
]

MAX_TOKEN_COUNT = 2**53 - 1
"""The largest token count rxllm keeps (the largest integer every JSON reader holds exactly)."""

_T = TypeVar("_T")
_log = logging.getLogger("rxllm.providers")

_KIND_NAMES: dict[type, str] = {dict: "an object", list: "an array", str: "a string", int: "an integer"}


# --------------------------------------------------------------------------------------------
# reading


class WireReader:
    """JSON decoding and shape checks for one provider; every failure is a :class:`~rxllm.ProtocolError`.

    The ``*_at`` methods read ``parent[key]`` and name it ``{where}.{key}`` when it has the wrong
    type; the ``where`` text is only formatted on failure, so a check costs a lookup and an
    ``isinstance``. A JSON ``true``/``false`` is never accepted as an integer.
    """

    __slots__ = ("provider",)

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def decode(self, data: str | bytes, what: str) -> Any:
        """The JSON value of ``data`` (any JSON type).

        Raises:
            ProtocolError: ``data`` is not JSON (or nests past the decoder's limit).
        """
        try:
            return loads(data)
        except (ValueError, TypeError) as exc:  # TypeError: a str holding lone surrogates
            raise self._not_json(what, exc) from exc

    def decode_object(self, data: str | bytes, what: str) -> dict[str, Any]:
        """The JSON object of ``data``.

        Raises:
            ProtocolError: ``data`` is not JSON, or not a JSON object.
        """
        try:  # not self.decode(): the OpenAI Chat parser calls this once per streamed event
            value = loads(data)
        except (ValueError, TypeError) as exc:
            raise self._not_json(what, exc) from exc
        if type(value) is not dict:  # the decoder makes plain dicts
            raise self.wrong(what, "a JSON object", value)
        return value

    def _not_json(self, what: str, exc: Exception) -> ProtocolError:
        return ProtocolError(f"{what} is not valid JSON: {exc}", provider=self.provider)

    def wrong(self, where: str, expected: str, value: object) -> ProtocolError:
        """The error for ``value`` found at ``where`` when ``expected`` (``"an object"``...) was due."""
        return ProtocolError(f"{where} should be {expected}, got {type(value).__name__}", provider=self.provider)

    def expect(self, value: object, kind: type[_T], where: str) -> _T:
        """``value`` when it is a ``kind`` (``dict``, ``list``, ``str`` or ``int``, never a bool)."""
        if isinstance(value, kind) and not isinstance(value, bool):
            return value
        raise self.wrong(where, _KIND_NAMES.get(kind, kind.__name__), value)

    def object_at(self, parent: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
        """``parent[key]``, which must be an object."""
        value = parent.get(key)
        if isinstance(value, dict):
            return value
        raise self.wrong(f"{where}.{key}", "an object", value)

    def optional_object_at(self, parent: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
        """``parent[key]``: an object, or ``None`` when absent or ``null``."""
        value = parent.get(key)
        if value is None or isinstance(value, dict):
            return value
        raise self.wrong(f"{where}.{key}", "an object", value)

    def string_at(self, parent: Mapping[str, Any], key: str, where: str) -> str:
        """``parent[key]``, which must be a string."""
        value = parent.get(key)
        if isinstance(value, str):
            return value
        raise self.wrong(f"{where}.{key}", "a string", value)

    def optional_string_at(self, parent: Mapping[str, Any], key: str, where: str) -> str | None:
        """``parent[key]``: a string, or ``None`` when absent or ``null``."""
        value = parent.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self.wrong(f"{where}.{key}", "a string", value)

    def list_at(self, parent: Mapping[str, Any], key: str, where: str) -> list[Any]:
        """``parent[key]``: an array, or ``[]`` when absent or ``null``."""
        value = parent.get(key)
        if value is None:
            return []
        if isinstance(value, list):
            return value
        raise self.wrong(f"{where}.{key}", "an array", value)

    def index_at(self, parent: Mapping[str, Any], key: str, where: str) -> int:
        """``parent[key]``, which must be a non-negative integer (a block or output index)."""
        value = parent.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise self.wrong(f"{where}.{key}", "a non-negative integer", value)

    def count_at(self, parent: object, key: str, where: str) -> int | None:
        """``parent[key]`` as a token count, or ``None`` when absent, ``null`` or not a count.

        One rule for every provider's usage figures: a count is an integer from 0 to
        :data:`MAX_TOKEN_COUNT`. Any other value (``-1``, ``2**70``, ``"12"``, ``1.5``, ``true``)
        is dropped and logged at WARNING; the answer it came with is kept.
        """
        if not isinstance(parent, dict):
            return None
        value = parent.get(key)
        if value is None or (type(value) is int and 0 <= value <= MAX_TOKEN_COUNT):
            return value
        _log.warning("[%s] ignored the usage figure %s.%s = %.40r: a token count is an integer from 0 to 2**53-1;"
                     " the rest of the answer is kept", self.provider, where, key, value)
        return None

    def usage_object_at(self, parent: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
        """``parent[key]`` when it is a usage object; ``None`` when absent, ``null`` or not an
        object (then dropped and logged at WARNING, as :meth:`count_at` drops a bad figure)."""
        value = parent.get(key)
        if value is None or isinstance(value, dict):
            return value
        _log.warning("[%s] ignored %s.%s: a usage report is an object, got %s; the rest of the answer is kept",
                     self.provider, where, key, type(value).__name__)
        return None


def in_band_error(error: object, *, code_keys: tuple[str, ...], retryable_codes: frozenset[str]) -> InBandError:
    """An API's error object as an :class:`~rxllm.InBandError` (anything but an object counts as ``{}``).

    The code is the first string among ``code_keys``; the error is retryable when that code is one
    of ``retryable_codes``; a missing or empty message becomes a generic one.

    >>> in_band_error({"type": "overloaded_error", "message": "Overloaded"}, code_keys=("type",),
    ...               retryable_codes=frozenset({"overloaded_error"}))
    InBandError(message='Overloaded', code='overloaded_error', retryable=True)
    """
    fields = error if isinstance(error, dict) else {}
    code = next((value for key in code_keys if isinstance(value := fields.get(key), str)), None)
    message = fields.get("message")
    return InBandError(
        message if isinstance(message, str) and message else "the provider reported an error",
        code=code,
        retryable=code in retryable_codes,
    )


# --------------------------------------------------------------------------------------------
# writing


# One encoder each, built once: ``json.dumps`` with any option builds a ``JSONEncoder`` per call (the
# same options give the same text; ``encode`` keeps no state, so one instance serves every thread).
_TEXT_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_BODY_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_text(value: object) -> str:
    """Compact JSON text with non-ASCII characters kept (tool arguments, function responses).

    >>> json_text({"city": "Köln", "days": [1, 2]})
    '{"city":"Köln","days":[1,2]}'
    """
    return _TEXT_ENCODER.encode(value)


def body_json(value: object) -> str:
    """A request body's JSON text: :func:`json_text` without NaN or infinities (``allow_nan=False``).

    Every body a mapper sends is this text of its body dict, UTF-8 encoded. Raises what
    ``json.dumps`` raises (``TypeError``, ``ValueError``, ``RecursionError``).

    >>> body_json({"model": "m", "messages": [{"role": "user", "content": "Grüß"}]})
    '{"model":"m","messages":[{"role":"user","content":"Grüß"}]}'
    """
    return _BODY_ENCODER.encode(value)


class ParametersSlot:
    """Where a declaration's ``parameters`` go in a :func:`kept_json` value (encoded per request)."""

    __slots__ = ("declaration",)

    def __init__(self, declaration: FunctionDeclaration) -> None:
        self.declaration = declaration


KeptJson = tuple[str | FunctionDeclaration, ...]
"""JSON text in pieces: the strings as they are, each declaration as its ``parameters``' JSON."""


def kept_json(value: object) -> KeptJson:
    """``body_json(value)`` in pieces, a :class:`ParametersSlot` in ``value`` standing for its
    declaration's ``parameters``: :func:`render_kept` of the pieces is ``body_json`` of ``value``
    with each slot replaced by those parameters, read when rendered.

    A declaration is frozen but its ``parameters`` is a dict that can change in place: what is
    kept of a config holds the declaration, never its parameters' JSON.

    >>> declaration = FunctionDeclaration(name="f", parameters={"type": "object"})
    >>> pieces = kept_json({"tools": [{"name": "f", "schema": ParametersSlot(declaration)}], "n": 1})
    >>> render_kept(pieces)
    '{"tools":[{"name":"f","schema":{"type":"object"}}],"n":1}'
    >>> declaration.parameters["required"] = []
    >>> render_kept(pieces)
    '{"tools":[{"name":"f","schema":{"type":"object","required":[]}}],"n":1}'
    """
    pieces: list[str | FunctionDeclaration] = []

    def walk(item: object) -> None:
        if isinstance(item, ParametersSlot):
            pieces.append(item.declaration)
        elif not _holds_slot(item):
            pieces.append(body_json(item))
        elif isinstance(item, dict):
            pieces.append("{")
            for number, (key, member) in enumerate(item.items()):
                pieces.append(f'{"," if number else ""}{body_json(key)}:')
                walk(member)
            pieces.append("}")
        else:
            assert isinstance(item, (list, tuple))
            pieces.append("[")
            for number, member in enumerate(item):
                if number:
                    pieces.append(",")
                walk(member)
            pieces.append("]")

    walk(value)
    return _joined(pieces)


def kept_members(members: Mapping[str, object]) -> KeptJson:
    """:func:`kept_json` of ``members`` as they go after other members of a body: ``,"a":1,"b":2``
    (nothing for no members)."""
    if not members:
        return ()
    pieces = list(kept_json(dict(members)))
    first, last = pieces[0], pieces[-1]
    assert isinstance(first, str) and first[0] == "{" and isinstance(last, str) and last[-1] == "}"
    pieces[0] = "," + first[1:]
    pieces[-1] = pieces[-1][:-1]  # type: ignore[index]
    return _joined([piece for piece in pieces if piece != ""])


def _joined(pieces: list[str | FunctionDeclaration]) -> KeptJson:
    """``pieces`` with adjacent strings joined."""
    joined: list[str | FunctionDeclaration] = []
    for piece in pieces:
        last = joined[-1] if joined else None
        if isinstance(piece, str) and isinstance(last, str):
            joined[-1] = last + piece
        else:
            joined.append(piece)
    return tuple(joined)


def _holds_slot(item: object) -> bool:
    if isinstance(item, ParametersSlot):
        return True
    if isinstance(item, dict):
        return any(_holds_slot(member) for member in item.values())
    if isinstance(item, (list, tuple)):
        return any(_holds_slot(member) for member in item)
    return False


def render_kept(pieces: KeptJson) -> str:
    """The JSON text of :func:`kept_json`'s pieces, each declaration's ``parameters`` encoded now.

    Raises what :func:`body_json` raises for parameters JSON cannot carry.
    """
    return "".join([piece if isinstance(piece, str) else body_json(piece.parameters) for piece in pieces])


_T_KEPT = TypeVar("_T_KEPT")


class KeptByConfig:
    """What a mapper built from a config alone, per config object, for the requests that reuse it.

    An agent sends the same :class:`~rxllm.GenerateContentConfig` object (its instruction and tools)
    on every step of every turn. The config and everything in it are frozen, except the JSON dicts
    (a declaration's ``parameters``: :func:`kept_json` keeps the declaration, not its JSON), so
    what was built from it stays right. Kept by the config's identity, checked through a weak
    reference (a config is never kept alive by this, and an entry leaves with its config); at most
    ``limit`` configs (then it starts over). A dict's ``get``, item assignment and ``pop`` are
    atomic, so threads sharing a mapper need no lock (two may build the same entry; either is right).
    """

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = 16) -> None:
        self._entries: dict[int, tuple[weakref.ref[GenerateContentConfig], Any]] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, config: GenerateContentConfig, build: Callable[[GenerateContentConfig], _T_KEPT]) -> _T_KEPT:
        """What ``build(config)`` returned for this config object, building it on first use."""
        entries = self._entries
        key = id(config)
        entry = entries.get(key)
        if entry is not None and entry[0]() is config:
            kept: _T_KEPT = entry[1]
            return kept
        kept = build(config)
        if len(entries) >= self._limit:
            entries.clear()
        entries[key] = (weakref.ref(config, _forget(entries, key)), kept)
        return kept


def _forget(
    entries: dict[int, tuple[weakref.ref[GenerateContentConfig], Any]], key: int
) -> Callable[[weakref.ref[GenerateContentConfig]], None]:
    """The weak reference's callback: the entry leaves with its config (no other object has the
    config's id before the callback has run, so the entry under ``key`` is this one's or none)."""

    def forget(ref: weakref.ref[GenerateContentConfig]) -> None:
        entry = entries.get(key)
        if entry is not None and entry[0] is ref:
            entries.pop(key, None)

    return forget


ConfigField = Literal[
    "temperature",
    "top_p",
    "top_k",
    "max_output_tokens",
    "stop_sequences",
    "candidate_count",
    "seed",
    "response_mime_type",
    "response_schema",
]
"""The :class:`~rxllm.GenerateContentConfig` fields that go on the wire as they are, under a name."""


def wire_config(config: GenerateContentConfig, names: Iterable[tuple[ConfigField, str]]) -> dict[str, Any]:
    """The fields of ``config`` that are set, under their wire names, in the order of ``names``.

    A field is set when it is not ``None`` and not an empty tuple; tuples go out as lists.

    >>> wire_config(GenerateContentConfig(temperature=0.2, stop_sequences=()),
    ...             [("temperature", "temperature"), ("top_p", "topP"), ("stop_sequences", "stop")])
    {'temperature': 0.2}
    """
    wire: dict[str, Any] = {}
    for field, wire_name in names:
        value = getattr(config, field)
        if isinstance(value, tuple):
            if value:
                wire[wire_name] = list(value)
        elif value is not None:
            wire[wire_name] = value
    return wire


def system_text(llm_request: LlmRequest) -> str:
    """The system instruction's text and every ``system``-role content's, joined by blank lines."""
    config = llm_request.config
    texts = [config.system_instruction.text()] if config.system_instruction is not None else []
    texts.extend(content.text() for content in llm_request.contents if content.role == "system")
    return "\n\n".join(text for text in texts if text)


def data_url(mime_type: str, data: bytes) -> str:
    """A ``data:`` URL with ``data`` in base64.

    >>> data_url("image/png", b"png")
    'data:image/png;base64,cG5n'
    """
    return f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}"


# --------------------------------------------------------------------------------------------
# tool_config, built-in tools and safety settings: read the same way for every provider


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """A request's ``tool_config.function_calling_config``, checked against its function declarations.

    Attributes:
        mode: the mode the request sets; ``None`` when unset or ``MODE_UNSPECIFIED`` (the
            provider's default, which is ``AUTO`` everywhere).
        names: the allowed function names, each one declared, in the order given.
        parallel: ``parallel_tool_calls`` as set (``None``: the provider's default).
        stream_arguments: ``stream_function_call_arguments`` as set.
        all_declarations: every function declaration of the request.
    """

    mode: FunctionCallingConfigMode | None
    names: tuple[str, ...]
    parallel: bool | None
    stream_arguments: bool | None
    all_declarations: tuple[FunctionDeclaration, ...]

    @property
    def forced_name(self) -> str | None:
        """The one function the model must call (mode ``ANY`` with exactly one allowed name)."""
        if self.mode is FunctionCallingConfigMode.ANY and len(self.names) == 1:
            return self.names[0]
        return None

    def declarations(self, *, api_takes_names: bool) -> list[FunctionDeclaration]:
        """The declarations to send.

        Allowed names restrict the declarations sent when the API cannot carry them itself:
        with mode ``AUTO`` (or unset) on every API, and with ``ANY`` and several names on an API
        without a list of allowed names (``api_takes_names=False``: OpenAI, Anthropic), which
        can only force one named function.
        """
        if not self.names:
            return list(self.all_declarations)
        restrict = self.mode in (None, FunctionCallingConfigMode.AUTO) or (
            not api_takes_names and self.forced_name is None
        )
        if not restrict:
            return list(self.all_declarations)
        allowed = set(self.names)
        return [d for d in self.all_declarations if d.name in allowed]


_KNOWN_MODES = frozenset(FunctionCallingConfigMode.__members__.values())


def tool_choice(config: GenerateContentConfig, *, provider: str) -> ToolChoice:
    """The function-calling choice of ``config``, checked.

    Raises:
        ConfigurationError: an unknown mode, an allowed name that is not declared, or allowed
            names with mode ``NONE``.
    """
    declarations = tuple(config.function_declarations())
    calling = config.tool_config.function_calling_config if config.tool_config is not None else None
    if calling is None:
        return ToolChoice(None, (), None, None, declarations)
    mode = calling.mode
    if mode is not None and mode not in _KNOWN_MODES:
        raise ConfigurationError(f"function calling mode {str(mode)!r} is not known", provider=provider)
    if mode is FunctionCallingConfigMode.MODE_UNSPECIFIED:
        mode = None
    names = tuple(calling.allowed_function_names or ())
    if names:
        if mode is FunctionCallingConfigMode.NONE:
            raise ConfigurationError("allowed_function_names cannot be combined with mode NONE", provider=provider)
        declared = {d.name for d in declarations}
        unknown = [name for name in names if name not in declared]
        if unknown:
            raise ConfigurationError(
                f"allowed_function_names names functions the request does not declare: {unknown}", provider=provider
            )
    return ToolChoice(mode, names, calling.parallel_tool_calls, calling.stream_function_call_arguments, declarations)


def built_in_tools(config: GenerateContentConfig) -> list[tuple[str, BaseModel]]:
    """Every built-in tool of ``config`` as ``(field name, settings)``, in tool order."""
    found: list[tuple[str, BaseModel]] = []
    for tool in config.tools or ():
        for field in BUILT_IN_TOOLS:
            value = getattr(tool, field)
            if value is not None:
                found.append((field, value))
    return found


def refuse_built_in(field: str, *, api: str, provider: str) -> ConfigurationError:
    """The error for a built-in tool ``api`` does not run (``field`` is its :class:`~rxllm.Tool` field)."""
    owner = BUILT_IN_TOOLS[field]
    return ConfigurationError(
        f"the built-in tool {field!r} runs on {owner} only; {api} cannot run it", provider=provider
    )


_HARMLESS_THRESHOLDS = frozenset(
    {HarmBlockThreshold.HARM_BLOCK_THRESHOLD_UNSPECIFIED, HarmBlockThreshold.BLOCK_NONE, HarmBlockThreshold.OFF}
)


def check_gemini_only_options(config: GenerateContentConfig, *, api: str, provider: str) -> None:
    """Check the options only Gemini has, for an API without them: ``safety_settings`` and
    ``tool_config``'s ``retrieval_config`` and ``include_server_side_tool_invocations``.

    A safety setting that only relaxes Gemini's filters (``BLOCK_NONE``, ``OFF``, or no
    threshold) is a no-op elsewhere: the API's own policy applies either way. A setting that asks
    for stricter blocking cannot be enforced, so it is refused rather than dropped.

    Raises:
        ConfigurationError: a safety setting with a blocking threshold, or one of the Gemini-only
            ``tool_config`` fields set.
    """
    for setting in config.safety_settings or ():
        if setting.threshold is not None and setting.threshold not in _HARMLESS_THRESHOLDS:
            category = str(setting.category) if setting.category is not None else "a category"
            raise ConfigurationError(
                f"safety_settings: {api} has no per-request safety thresholds, so {setting.threshold!s} "
                f"for {category} cannot be enforced (only BLOCK_NONE and OFF, which leave {api}'s own "
                "policy in place, are accepted)",
                provider=provider,
            )
    tool_config = config.tool_config
    if tool_config is not None:
        for field in ("retrieval_config", "include_server_side_tool_invocations"):
            if getattr(tool_config, field) is not None:
                raise ConfigurationError(f"tool_config.{field} is Gemini's; {api} has no equivalent", provider=provider)


# --------------------------------------------------------------------------------------------
# extra body


def merge_extra_body(
    body: dict[str, Any], extra: Mapping[str, Any], *, overrides: bool, provider: str, _path: str = ""
) -> None:
    """Merge ``extra`` into ``body`` in place: the one rule for every ``extra_body``.

    A member ``body`` lacks is added. Where both hold an object, the objects merge member by
    member, at any depth. Where either holds anything else (a string, number, array, null) and
    the values differ, ``body``'s value (rxllm's) is kept and a warning names the member (never
    its value), unless ``overrides`` is true: then ``extra``'s value replaces it. Added values
    are copies, so the request config they came from is never shared with the body.

    >>> body = {"model": "m", "stream_options": {"include_usage": True}}
    >>> merge_extra_body(body, {"model": "x", "ignore_eos": True, "stream_options": {"chunk": 1}},
    ...                  overrides=False, provider="toy")
    >>> body
    {'model': 'm', 'stream_options': {'include_usage': True, 'chunk': 1}, 'ignore_eos': True}
    """
    for key, value in extra.items():
        where = f"{_path}.{key}" if _path else key
        if key not in body:
            body[key] = _copy_json(value)
            continue
        current = body[key]
        if isinstance(current, dict) and isinstance(value, Mapping):
            merged = dict(current)  # the body's objects may be shared (a cached schema): copy, then merge
            merge_extra_body(merged, value, overrides=overrides, provider=provider, _path=where)
            body[key] = merged
        elif current == value:
            continue
        elif overrides:
            body[key] = _copy_json(value)
        else:
            _log.warning(
                "[%s] extra_body member %r is also set by rxllm; rxllm's value is sent "
                "(pass extra_body_overrides=True to send yours)",
                provider,
                where,
            )


def _copy_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy_json(v) for v in value]
    return value


def _overlay(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` merged over it (objects member by member, ``top`` winning elsewhere)."""
    merged = dict(base)
    for key, value in top.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = _overlay(current, value)
        else:
            merged[key] = value
    return merged


class CallIdPairing:
    """Ids for the function calls a history holds without one, for APIs that require them.

    A call without an id gets the next generated one (``id_format`` with a counter from 1); a
    response without an id takes the oldest generated id of an earlier call with the same name.
    One instance per request.

    >>> ids = CallIdPairing("call_{}", provider="toy")
    >>> ids.for_call("f", None), ids.for_call("g", "given"), ids.for_response("f", None)
    ('call_1', 'given', 'call_1')
    """

    __slots__ = ("_count", "_id_format", "_pending", "_provider")

    def __init__(self, id_format: str, *, provider: str) -> None:
        self._id_format = id_format
        self._provider = provider
        self._count = 0
        self._pending: dict[str, deque[str]] = {}

    def for_call(self, name: str, call_id: str | None) -> str:
        """The id to send for a call to ``name`` (its own id when it has one)."""
        if call_id:
            return call_id
        self._count += 1
        made = self._id_format.format(self._count)
        self._pending.setdefault(name, deque()).append(made)
        return made

    def for_response(self, name: str, response_id: str | None) -> str:
        """The id to send for a response from ``name`` (its own id when it has one).

        Raises:
            ConfigurationError: it has no id and no earlier call to ``name`` without one is unanswered.
        """
        if response_id:
            return response_id
        pending = self._pending.get(name)
        if not pending:
            raise ConfigurationError(
                f"the function response for {name!r} has no id and follows no function call without one",
                provider=self._provider,
            )
        return pending.popleft()


class JsonRequestMapper:
    """The base of every request mapper: a base URL, an API key, extra headers and an extra body,
    sent as a JSON ``POST``.

    A subclass normalizes and checks its arguments, passes them to ``__init__``, builds the URL,
    the body and its provider's headers (version, credential), and calls :meth:`_post` with the
    request's ``config.http_options``.

    Headers, later ones replacing earlier ones of the same name in any letter case: rxllm's
    defaults, the provider's, the model's ``extra_headers``, the request's
    ``http_options.headers``. Body: rxllm's, with the model's ``extra_body`` and the request's
    ``http_options.extra_body`` (the request's winning over the model's) merged in by
    :func:`merge_extra_body`; the request's ``extra_body_overrides``, when set, wins over the
    model's. Neither the mapper's repr nor the request's shows the key, a credential header, or
    the value of a body member with a credential's name.

    >>> class ToyMapper(JsonRequestMapper):
    ...     __slots__ = ()
    ...     def to_http_request(self, llm_request, *, model, stream):
    ...         return self._post(f"{self._base_url}/chat", {"model": model}, stream=stream,
    ...                           provider_headers={"x-api-key": self._api_key},
    ...                           http_options=llm_request.config.http_options)
    >>> mapper = ToyMapper(provider="toy", base_url="https://x", api_key="sk-secret", extra_headers={"Accept": "*/*"},
    ...                    extra_body={"ignore_eos": True, "api_key": "gw-secret"})
    >>> mapper
    ToyMapper(base_url='https://x', api_key='***', extra_headers={'Accept': '*/*'}, \
extra_body={'ignore_eos': True, 'api_key': '***'})
    >>> request = mapper.to_http_request(LlmRequest(), model="m", stream=True)
    >>> request.body, request.headers["Accept"], "accept" in request.headers
    (b'{"model":"m","ignore_eos":true,"api_key":"gw-secret"}', '*/*', False)
    """

    __slots__ = ("_api_key", "_base_url", "_extra_body", "_extra_body_overrides", "_extra_headers", "_provider")

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: str | None,
        extra_headers: Mapping[str, str] | None,
        extra_body: Mapping[str, JsonValue] | None = None,
        extra_body_overrides: bool = False,
    ) -> None:
        self._provider = provider
        self._base_url = base_url
        self._api_key = api_key
        self._extra_headers = dict(extra_headers or {})
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ConfigurationError(
                f"extra_body must be a mapping, got {type(extra_body).__name__}", provider=provider
            )
        self._extra_body: dict[str, Any] = _copy_json(extra_body or {})
        self._extra_body_overrides = bool(extra_body_overrides)
        register_secrets_of(self._extra_headers, self._extra_body)  # redacted everywhere, like the key

    @property
    def provider(self) -> str:
        """The provider's short name, used in errors and logs (``"openai"``, ``"anthropic"``, ``"gemini"``)."""
        return self._provider

    def __repr__(self) -> str:
        settings = "".join(f"{name}={value!r}, " for name, value in self._repr_settings().items())
        key = "'***'" if self._api_key else "None"
        extras = f", extra_body={redact_json(self._extra_body)!r}" if self._extra_body else ""
        if self._extra_body_overrides:
            extras += ", extra_body_overrides=True"
        return (
            f"{type(self).__name__}(base_url={redact_url(self._base_url)!r}, {settings}api_key={key}, "
            f"extra_headers={redact_headers(self._extra_headers)!r}{extras})"
        )

    def _repr_settings(self) -> dict[str, object]:
        """The subclass's own settings, shown in the repr after the base URL."""
        return {}

    def _endpoint(self, path: str) -> str:
        """``path`` (``"/chat/completions"``, possibly with its own query) under the base URL; see :func:`join_url`."""
        return join_url(self._base_url, path)

    def _post(
        self,
        url: str,
        body: Mapping[str, object],
        *,
        stream: bool,
        provider_headers: Mapping[str, str],
        http_options: HttpOptions | None,
    ) -> HttpRequest:
        """``POST url`` with ``body`` (and the extra bodies merged in) as compact UTF-8 JSON.

        The headers: ``content-type``, ``accept`` (``text/event-stream`` when streaming, else
        ``application/json``), ``user-agent`` (``rxllm/<version>``), ``provider_headers``, the
        model's extra headers, then the request's (an extra ``User-Agent`` replaces rxllm's).

        Raises:
            ConfigurationError: the body holds what JSON cannot carry (NaN, a lone surrogate, a
                non-JSON value, nesting deeper than the encoder recurses).
        """
        extra = self._extra_body
        overrides = self._extra_body_overrides
        request_headers: Mapping[str, str] = {}
        if http_options is not None:
            if http_options.extra_body:
                extra = _overlay(extra, http_options.extra_body)
            if http_options.extra_body_overrides is not None:
                overrides = http_options.extra_body_overrides
            request_headers = http_options.headers or {}
            register_secrets_of(request_headers, http_options.extra_body)
        if extra:
            body = merged = dict(body)
            merge_extra_body(merged, extra, overrides=overrides, provider=self._provider)
        try:
            text = body_json(body)
        except (TypeError, ValueError, RecursionError) as exc:
            raise self._not_json(exc) from exc
        return self._post_text(url, text, stream=stream, provider_headers=provider_headers,
                               request_headers=request_headers)

    def _merges_extra_body(self, http_options: HttpOptions | None) -> bool:
        """Whether :meth:`_post` would merge an extra body into a request with ``http_options``
        (the model's ``extra_body``, or the request's ``http_options.extra_body``)."""
        return bool(self._extra_body) or (http_options is not None and bool(http_options.extra_body))

    def _post_json(
        self,
        url: str,
        text: str,
        *,
        stream: bool,
        provider_headers: Mapping[str, str],
        http_options: HttpOptions | None,
    ) -> HttpRequest:
        """:meth:`_post` of a body whose JSON ``text`` the subclass built itself (the same text as
        :func:`body_json` of the body dict), for a request :meth:`_merges_extra_body` says merges no
        extra body: the same request, headers and errors as :meth:`_post`."""
        request_headers: Mapping[str, str] = {}
        if http_options is not None:
            request_headers = http_options.headers or {}
            register_secrets_of(request_headers, http_options.extra_body)
        return self._post_text(url, text, stream=stream, provider_headers=provider_headers,
                               request_headers=request_headers)

    def _not_json(self, exc: BaseException) -> ConfigurationError:
        return ConfigurationError(f"the request cannot be encoded as JSON: {exc}", provider=self._provider)

    def _post_text(
        self, url: str, text: str, *, stream: bool, provider_headers: Mapping[str, str],
        request_headers: Mapping[str, str],
    ) -> HttpRequest:
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate
            raise self._not_json(exc) from exc
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
            "user-agent": USER_AGENT,
        }
        headers.update(provider_headers)
        for extra_headers in (self._extra_headers, request_headers):
            if extra_headers:
                replaced = {name.lower() for name in extra_headers}
                headers = {name: value for name, value in headers.items() if name.lower() not in replaced}
                headers.update(extra_headers)
        return HttpRequest(url=url, body=encoded, headers=headers, method="POST")


def join_url(base_url: str, path: str) -> str:
    """``path`` appended to ``base_url``'s path, with ``base_url``'s query string kept after it.

    A base URL may carry a query every request needs (Azure OpenAI's ``api-version``); it
    follows the path, after the path's own query if it has one.

    >>> join_url("https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "/chat/completions")
    'https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21'
    >>> join_url("https://g.example/?key=1", "/v1beta/models/m:streamGenerateContent?alt=sse")
    'https://g.example/v1beta/models/m:streamGenerateContent?alt=sse&key=1'
    >>> join_url("http://127.0.0.1:8080/v1/", "/responses")
    'http://127.0.0.1:8080/v1/responses'
    """
    base_path, _, base_query = base_url.partition("?")
    own_path, _, own_query = path.partition("?")
    query = "&".join(part for part in (own_query, base_query) if part)
    url = base_path.rstrip("/") + own_path
    return f"{url}?{query}" if query else url
