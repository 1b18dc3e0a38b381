"""The stream aggregator: where the streaming contract lives, and the only place merge rules do.

Merge rules (each has a test in ``tests/test_aggregation.py``):

1. Each chunk yields at most one partial. A partial carries only the chunk's new answer text
   and/or new thought text (thought first), role ``model``, ``partial=True`` -- never function
   calls, usage or finish data. A chunk with neither yields nothing.
2. Answer text concatenates into one text part of the final; thought text concatenates into
   thought parts, one per reasoning block (a ``thought_signature`` closes the block it signs;
   a ``redacted_thought`` is a block of its own with no text). Thought parts come first, then
   the text part, then function calls. Text is built with a list and one join: linear.
3. Tool-call fragments are buffered per provider index. ``id`` and ``name`` are the first
   non-empty values seen (never concatenated); argument pieces concatenate and are parsed only
   in :meth:`StreamAggregator.finish`: empty means ``{}``, anything but a JSON object raises
   :class:`~rxllm.MalformedFunctionCallError` naming the tool -- unless the turn already ended
   in error (an in-band error or a non-STOP finish such as MAX_TOKENS), where the cut-off call
   is left out and named in ``error_message`` rather than run with guessed arguments. A call
   without a provider id gets a generated ``adk-`` id, the same for the whole stream. Calls
   appear in provider-index order.
4. Finish reason, raw finish reason and model version: the last one reported wins. Usage: the
   last one reported wins, and a later chunk without usage does not clear it. All of them ride
   on the final only.
5. A non-STOP finish reason sets ``error_code`` (the reason's name) and ``error_message``, as ADK
   does. An in-band provider error sets them instead (it wins over the finish reason). A refusal
   (``refusal_delta``) becomes ``error_code="REFUSAL"`` with the refusal text as message when
   nothing else is wrong, so it always reaches the user.
6. An in-band error that arrives before any partial was emitted is raised as
   :class:`~rxllm.ProviderError` (so the retry policy may retry it: nothing has been shown);
   after the first partial it is recorded and reported on the final.
7. A tool call is *complete* (for :meth:`StreamAggregator.take_completed_calls`, the fine-grained
   stream's early notice) when its fragment says so (``complete=True``: the provider sent it whole
   or closed its block), when a fragment for a new index begins (providers stream calls one after
   another), or when the stream finishes. A complete call is parsed then; if its arguments do not
   parse yet it is not reported early, and :meth:`finish` decides its fate. An early-reported call
   is the very same ``FunctionCall`` the final carries (same id, same arguments).

The aggregator is pure: no I/O, no Rx, no clock. One per subscription (``defer``), so a retry
never inherits a half-filled buffer.
"""

from __future__ import annotations

import functools
import json
import sys
import uuid
import weakref
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from .._core import prevalidated
from .._core.errors import ConfigurationError, MalformedFunctionCallError, ProviderError
from .._core.redact import redact_secrets
from .._core.types import Content, FinishReason, FunctionCall, LlmResponse, Part, UsageMetadata
from .chunk import Chunk, InBandError, ToolCallFragment

__all__ = ["GENERATED_ID_PREFIX", "StreamAggregator", "generate_function_call_id"]

GENERATED_ID_PREFIX = "adk-"
"""Prefix of function-call ids rxllm generates (as ADK does); mappers never send these to a provider
that did not issue them."""

_FINISH_MESSAGES = {
    FinishReason.MAX_TOKENS: "the model stopped at the output token limit",
    FinishReason.SAFETY: "the model stopped: content was blocked for safety",
    FinishReason.RECITATION: "the model stopped: recitation",
    FinishReason.MALFORMED_FUNCTION_CALL: "the model produced a malformed function call",
}


_validate_response = LlmResponse.__pydantic_validator__.validate_python
_new = prevalidated.new
_set_dict = prevalidated.set_dict
_set_fields_set = prevalidated.set_fields_set
_set_extra = prevalidated.set_extra
_set_private = prevalidated.set_private


def _direct_defaults(cls: type[BaseModel], fields: frozenset[str]) -> dict[str, Any] | None:
    """``cls``'s field defaults, when instances may be built directly from already-valid ``fields``; else ``None``.

    The hot path builds three models per partial (``LlmResponse``, ``Content``, ``Part``) from
    values it made itself (a ``str``, ``True``, ``"model"``), so validation proves nothing there.
    :func:`build_partial` does what ``model_construct`` does, minus its per-field loop: a copy of
    the defaults with the values set, no extra, no private attributes, and every instance of one
    shape shares one ``model_fields_set`` (pydantic copies it before changing it, as in
    ``model_copy(update=...)``), so a partial is 6 GC-tracked objects instead of 9 (and 1 once
    the subscriber keeps partials: see :func:`_gc_untrack`). Safe only when no default is mutable or made
    by a factory and the model has no validators or post-init hook to skip; otherwise ``None`` (and
    the aggregator validates). ``tests/test_aggregation.py`` checks the result is equal to
    a validated one in every observable way.
    """
    if not prevalidated.buildable(cls) or not fields <= cls.model_fields.keys():
        return None
    defaults: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None or field.default is ... or not _immutable(field.default):
            return None
        defaults[name] = field.default
    return defaults


def _immutable(value: object) -> bool:
    return value is None or type(value) in (str, int, float, bool, bytes) or value == ()


_response_defaults = _direct_defaults(LlmResponse, frozenset(("content", "partial")))
_content_defaults = _direct_defaults(Content, frozenset(("role", "parts")))
_part_defaults = _direct_defaults(Part, frozenset(("text", "thought")))
_DIRECT = None not in (_response_defaults, _content_defaults, _part_defaults)


def _shared_keys(cls: type[BaseModel], defaults: dict[str, Any] | None) -> dict[str, Any]:
    """``defaults`` as an instance dict of ``cls`` that shares its keys with the class (CPython's
    split table): its copies store only the values, 232 bytes instead of 464 for the 20 fields of
    ``LlmResponse`` and of ``Part`` (a kept partial is about a fifth smaller, and the garbage
    collector's full passes over many kept partials about a tenth faster, measured). CPython sizes
    a split dict's values for the keys its class may still add, one fewer for each instance made
    so, down to one spare: made until that stops shrinking, ``Content``'s two keys take 88 bytes
    instead of a plain dict's 184 (the smaller of the two is taken, whatever the interpreter)."""
    plain = dict(defaults or {})
    if defaults is None:
        return plain
    state: dict[str, Any] = plain
    size = -1
    for _ in range(64):  # CPython 3.11: room for 30 keys at first (the room is the class's: every copy has it)
        instance = _new(cls)
        for name, value in defaults.items():
            object.__setattr__(instance, name, value)
        state = instance.__dict__
        if sys.getsizeof(state.copy()) == size:
            break
        size = sys.getsizeof(state.copy())
    return state if size < sys.getsizeof(plain.copy()) else plain


_response_copy = _shared_keys(LlmResponse, _response_defaults).copy
_content_copy = _shared_keys(Content, _content_defaults).copy
_part_copy = _shared_keys(Part, _part_defaults).copy
_RESPONSE_FIELDS = {"content", "partial"}
_CONTENT_FIELDS = {"role", "parts"}
_TEXT_FIELDS = {"text"}
_THOUGHT_FIELDS = {"text", "thought"}


def build_partial(text: str | None, thought: str | None, untrack: _Untrack | None = None) -> LlmResponse:
    """The partial of a chunk with new answer ``text`` and/or ``thought`` text (at least one non-empty).

    Exactly what ``LlmResponse.model_validate`` makes of ``{"content": {"role": "model", "parts":
    [thought part, text part]}, "partial": True}``, built without validating when that is safe
    (see :func:`_direct_defaults`): written out in full, as this runs once per network event.

    With ``untrack`` (the aggregator passes it once its subscriber keeps partials, see
    :func:`_gc_untrack`), the ``Part``, the parts tuple, the ``Content`` and the response's dict are
    taken off the garbage collector's lists as they are built (the other two dicts hold only
    untracked values, so CPython leaves them untracked): a kept partial is one GC-tracked object,
    the ``LlmResponse`` itself, instead of six.
    """
    if not _DIRECT:
        raw: list[dict[str, object]] = [{"text": thought, "thought": True}] if thought else []
        if text:
            raw.append({"text": text})
        # One validator call builds the nested models (measured 1.9 µs, against 2.9 µs for three constructors).
        partial: LlmResponse = _validate_response({"content": {"role": "model", "parts": raw}, "partial": True})
        return partial
    if thought:
        thought_part = _new(Part)
        state = _part_copy()
        state["text"] = thought
        state["thought"] = True
        _set_dict(thought_part, state)
        _set_fields_set(thought_part, _THOUGHT_FIELDS)
        _set_extra(thought_part, None)
        _set_private(thought_part, None)
        if untrack is not None:
            untrack(thought_part)
        parts: tuple[Part, ...] = (thought_part,)
    else:
        parts = ()
    if text:
        part = _new(Part)
        state = _part_copy()
        state["text"] = text
        _set_dict(part, state)
        _set_fields_set(part, _TEXT_FIELDS)
        _set_extra(part, None)
        _set_private(part, None)
        if untrack is not None:
            untrack(part)
        parts = (*parts, part) if parts else (part,)
    content = _new(Content)
    if untrack is not None:
        untrack(parts)  # before it goes into the dict: a dict holding only untracked values stays untracked
        untrack(content)
    state = _content_copy()
    state["role"] = "model"
    state["parts"] = parts
    _set_dict(content, state)
    _set_fields_set(content, _CONTENT_FIELDS)
    _set_extra(content, None)
    _set_private(content, None)
    response: LlmResponse = _new(LlmResponse)
    state = _response_copy()
    state["content"] = content
    state["partial"] = True
    if untrack is not None:
        untrack(state)  # a dict holding any model instance is tracked by CPython, tracked or not
    _set_dict(response, state)
    _set_fields_set(response, _RESPONSE_FIELDS)
    _set_extra(response, None)
    _set_private(response, None)
    return response


_Untrack = Callable[[object], None]


@functools.cache
def _gc_untrack() -> _Untrack | None:
    """CPython's ``PyObject_GC_UnTrack`` (through ``ctypes``, loaded on first use), or ``None`` elsewhere.

    Why: a subscriber that keeps every partial (``ops.to_list()``, a recorder, a test) keeps
    six GC-tracked objects alive per partial, so a long stream crosses the collector's
    full-collection threshold often, and each full pass walks the application's whole heap
    (half a second with a web framework, two SDKs and OpenTelemetry imported: the "partials kept"
    rows of ``docs/benchmarks.md``). A partial's graph cannot hold a reference cycle -- its models
    are frozen and it holds only strings, ``True``, ``None`` and its own models, built here and
    referenced by nothing else -- so the collector has nothing to find in it, and reference counting
    frees it as before. CPython's collector untracks tuples and dicts of such atomic values by
    itself; this does the same for the partial's ``Part`` and ``Content`` instances, which it
    cannot judge. (A dict that is later given a tracked value is tracked again by CPython.)
    """
    if sys.implementation.name != "cpython":
        return None
    try:
        import ctypes

        untrack: _Untrack = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("PyObject_GC_UnTrack", ctypes.pythonapi))
    except (ImportError, AttributeError, OSError):  # pragma: no cover - CPython always has it
        return None
    return untrack


class _Slot:
    __slots__ = ("value",)

    value: object


def _held_by_a_slot_and_a_local() -> int:
    """What ``sys.getrefcount`` says of an object only a slot and a local refer to (3 on CPython 3.11)."""
    holder = _Slot()
    holder.value = object()
    value = holder.value
    return sys.getrefcount(value)


_UNSHARED = _held_by_a_slot_and_a_local()
_PROBES = 8
_getrefcount = sys.getrefcount
_weakref = weakref.ref


# What a stream's containers start as until it has something to put in them (see StreamAggregator):
# empty, shared, and without the methods that would change them (a write would raise, never leak).
_NO_LIST = cast(list[Any], ())
_NO_CALLS = cast(dict[int, Any], MappingProxyType({}))
_NO_INDICES = cast(set[int], frozenset())


def generate_function_call_id() -> str:
    """A fresh client-side function-call id (``adk-`` + a UUID4)."""
    return GENERATED_ID_PREFIX + str(uuid.uuid4())


class _ToolCallBuffer:
    __slots__ = (
        "arguments", "call", "complete", "generated_id", "index", "name", "provider_id", "reported",
        "thought_signature",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.complete = False  # no more fragments expected (see merge rule 7)
        self.reported = False  # returned by take_completed_calls
        self.call: FunctionCall | None = None  # parsed once, shared by the early notice and the final
        self.provider_id: str | None = None
        self.generated_id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []
        self.thought_signature: bytes | None = None

    def add(self, fragment: ToolCallFragment) -> None:
        if self.provider_id is None and fragment.id:
            self.provider_id = fragment.id
        if self.name is None and fragment.name:
            self.name = fragment.name
        if fragment.arguments_delta:
            self.arguments.append(fragment.arguments_delta)
        if self.thought_signature is None and fragment.thought_signature is not None:
            self.thought_signature = fragment.thought_signature

    @property
    def id(self) -> str:
        if self.provider_id is not None:
            return self.provider_id
        if self.generated_id is None:
            self.generated_id = generate_function_call_id()
        return self.generated_id


class _ThoughtBlock:
    __slots__ = ("closed", "pieces", "signature")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.signature: bytes | None = None
        self.closed = False

    def to_part(self) -> Part:
        text = "".join(self.pieces) if self.pieces else None
        return Part(text=text, thought=True, thought_signature=self.signature)


class StreamAggregator:
    """Turns one stream of :class:`~rxllm.Chunk` into partials and exactly one final.

    >>> from rxllm import Chunk, StreamAggregator
    >>> agg = StreamAggregator()
    >>> [r.text() for r in agg.accept(Chunk(text_delta="The order"))]
    ['The order']
    >>> agg.accept(Chunk(text_delta=" ships Tuesday", usage=None))[0].partial
    True
    >>> final = agg.finish()
    >>> final.text(), final.partial
    ('The order ships Tuesday', None)
    """

    __slots__ = (
        "_calls",
        "_error",
        "_finish_reason",
        "_has_emitted",
        "_last",
        "_model_version",
        "_open_calls",
        "_probes",
        "_provider",
        "_quiet",
        "_raw_finish_reason",
        "_refusal",
        "_response_id",
        "_saw_end",
        "_text",
        "_text_signature",
        "_thoughts",
        "_to_report",
        "_untrack",
        "_usage",
    )

    def __init__(self, *, provider: str | None = None) -> None:
        self._provider = provider
        self._text: list[str] = []
        self._text_signature: bytes | None = None
        # The containers most streams never fill start as shared empty ones that cannot be written
        # to, each replaced by its own on first use: an open stream holds 448 bytes less.
        self._thoughts: list[_ThoughtBlock] = _NO_LIST
        self._calls: dict[int, _ToolCallBuffer] = _NO_CALLS  # the three made with the first fragment
        self._open_calls: list[_ToolCallBuffer] = _NO_LIST  # not complete yet: at most one per provider, usually
        self._to_report: set[int] = _NO_INDICES  # complete, not reported yet (take_completed_calls looks only here)
        self._refusal: list[str] = _NO_LIST
        self._finish_reason: FinishReason | None = None
        self._raw_finish_reason: str | None = None
        self._usage: UsageMetadata | None = None
        self._error: InBandError | None = None
        self._model_version: str | None = None
        self._response_id: str | None = None
        self._has_emitted = False
        self._saw_end = False
        self._quiet = False  # in absorb(): no partial is built
        # Each of the first ``_PROBES`` partials is watched (a weak reference) until the next one is built, which
        # looks whether anybody else still holds it: if so the subscriber keeps partials, and the
        # rest are built off the collector's lists (``_untrack``, see build_partial).
        self._last: weakref.ref[LlmResponse] | None = None
        self._probes = _PROBES
        self._untrack: _Untrack | None = None

    @property
    def has_emitted(self) -> bool:
        """Whether any partial was returned yet (after that, nothing may be retried)."""
        return self._has_emitted

    @property
    def is_complete(self) -> bool:
        """Whether the provider said the turn is over (end marker, finish reason or error)."""
        return self._saw_end or self._finish_reason is not None or self._error is not None

    @property
    def settled(self) -> bool:
        """Whether the finish reason and the usage both arrived: the turn's final is whole, only
        the provider's end marker (if it has one) can still follow."""
        return self._finish_reason is not None and self._usage is not None

    def tool_call_id(self, index: int) -> str:
        """The id the final will give the call at ``index`` (the provider's, or a generated one).

        Raises:
            ConfigurationError: no fragment with that index was accepted.
        """
        buffer = self._calls.get(index)
        if buffer is None:
            raise ConfigurationError(f"no tool call with index {index} in this stream")
        return buffer.id

    def accept(self, chunk: Chunk) -> list[LlmResponse]:
        """Take one chunk; return the partial it yields (zero or one)."""
        partial = self.accept_one(chunk)
        return [] if partial is None else [partial]

    def absorb(self, chunk: Chunk) -> None:
        """:meth:`accept` without building the partial, for a consumer that reads the chunk's deltas
        itself (:meth:`~rxllm.BaseLlm.stream_events` emits them as text and thought events)."""
        self._quiet = True
        try:
            self.accept_one(chunk)
        finally:
            self._quiet = False

    def absorber(self) -> Callable[[Chunk], object]:
        """What takes each chunk from now on as :meth:`absorb` does (no partial built), in one call
        per chunk: for a consumer that reads every chunk's deltas itself, and only absorbs (the
        fine-grained stream's reader). Its return value means nothing."""
        self._quiet = True  # (absorb, called after this, would switch partials back on)
        return self.accept_one

    @property
    def has_completed_calls(self) -> bool:
        """Whether :meth:`take_completed_calls` (without ``all_remaining``) has a call to return."""
        return bool(self._to_report)

    def accept_one(self, chunk: Chunk) -> LlmResponse | None:
        """:meth:`accept`, returning the partial itself or ``None`` (no list per chunk: the streams' hot path)."""
        # The hot path (one call per network event): unpack the NamedTuple once, test locals.
        (text, thought, fragments, finish_reason, usage, raw_finish_reason, error, refusal,
         thought_signature, redacted_thought, text_signature, model_version, end_of_stream,
         response_id) = chunk
        if fragments:
            calls = self._calls
            if calls is _NO_CALLS:  # the stream's first fragment
                calls = self._calls = {}
                self._open_calls = []
                self._to_report = set()
            open_calls = self._open_calls
            to_report = self._to_report
            for fragment in fragments:
                index = fragment.index
                buffer = calls.get(index)
                if buffer is None:
                    # A new index begins: the calls before it are complete. Only the open ones are
                    # touched (each call is closed once), so any number of calls stays linear.
                    for earlier in open_calls:
                        earlier.complete = True
                        to_report.add(earlier.index)
                    open_calls.clear()
                    buffer = calls[index] = _ToolCallBuffer(index)
                    if not fragment.complete:
                        open_calls.append(buffer)
                elif buffer.complete and not buffer.reported:
                    to_report.add(index)  # a late piece for a closed call: look at it again
                buffer.add(fragment)
                if fragment.complete and not buffer.complete:
                    buffer.complete = True
                    to_report.add(index)
                    if buffer in open_calls:
                        open_calls.remove(buffer)
        if finish_reason is not None:
            self._finish_reason = finish_reason
        if raw_finish_reason is not None:
            self._raw_finish_reason = raw_finish_reason
        if usage is not None:
            self._usage = usage
        if model_version is not None:
            self._model_version = model_version
        if response_id and self._response_id is None:  # the first one seen wins
            self._response_id = response_id
        if refusal:
            if self._refusal is _NO_LIST:
                self._refusal = []
            self._refusal.append(refusal)
        if text_signature is not None:
            self._text_signature = text_signature
        if end_of_stream:
            self._saw_end = True
        if error is not None:
            self._take_error(error)
        if thought:
            self._thought_block().pieces.append(thought)
        if thought_signature is not None:
            block = self._thought_block()
            block.signature = thought_signature
            block.closed = True
        if redacted_thought is not None:
            redacted = _ThoughtBlock()
            redacted.signature = redacted_thought
            redacted.closed = True
            if self._thoughts is _NO_LIST:
                self._thoughts = []
            self._thoughts.append(redacted)
        if text:
            self._text.append(text)
        elif not thought:
            return None
        self._has_emitted = True
        if self._quiet:
            return None
        untrack = self._untrack
        if untrack is None:
            probes = self._probes
            if not probes:
                return build_partial(text, thought)
            # One of the first partials: is the one before still held by anybody but this aggregator?
            last = self._last
            if last is not None and last() is not None:
                untrack = self._untrack = _gc_untrack()  # the subscriber keeps partials (None: not CPython)
                self._probes = 0
                self._last = None
            else:
                partial = build_partial(text, thought)
                self._probes = probes - 1
                # a weak reference, not the partial: an open stream at rest holds 72 bytes, not ~1 KiB
                self._last = _weakref(partial) if probes > 1 else None
                return partial
        return build_partial(text, thought, untrack)

    def take_completed_calls(self, *, all_remaining: bool = False) -> list[tuple[int, FunctionCall]]:
        """The tool calls that became complete since the last call, as ``(index, call)``, in index order.

        Each call is reported once. With ``all_remaining=True`` (after :meth:`finish`), every
        call not yet reported is complete. A call whose arguments do not parse is never reported
        (see merge rule 7).
        """
        out: list[tuple[int, FunctionCall]] = []
        # Without all_remaining, only the calls completed since the last look: linear over a stream.
        indices = sorted(self._calls) if all_remaining else sorted(self._to_report)
        if self._to_report:
            self._to_report.clear()
        for index in indices:
            buffer = self._calls[index]
            if buffer.reported or not (buffer.complete or all_remaining):
                continue
            call = self._parse_call(buffer, tolerate=True)
            if call is not None:
                buffer.reported = True
                out.append((index, call))
        return out

    def finish(self) -> LlmResponse:
        """Build the one final response: the whole turn, ``partial`` unset."""
        self._last = None
        parts: list[Part] = [block.to_part() for block in self._thoughts]
        if self._text or self._text_signature is not None:
            parts.append(Part(text="".join(self._text), thought_signature=self._text_signature))
        error_code, error_message = self._error_fields()
        dropped: list[str] = []
        for index in sorted(self._calls):
            buffer = self._calls[index]
            call = self._parse_call(buffer, tolerate=error_code is not None)
            if call is None:
                dropped.append(buffer.name or f"#{index}")
                continue
            parts.append(Part(function_call=call, thought_signature=buffer.thought_signature))
        if dropped:
            error_message = f"{error_message}; incomplete tool call(s) left out: {', '.join(dropped)}"
        if error_message:  # an in-band error may quote a key: cut before the final is stored or shown
            error_message = redact_secrets(error_message)
        metadata = {"finish_reason": self._raw_finish_reason} if self._raw_finish_reason is not None else None
        return LlmResponse(
            content=Content(role="model", parts=tuple(parts)),
            finish_reason=self._finish_reason,
            usage_metadata=self._usage,
            error_code=error_code,
            error_message=error_message,
            model_version=self._model_version,
            response_id=self._response_id,
            custom_metadata=metadata,
        )

    def _take_error(self, error: InBandError) -> None:
        if not self._has_emitted:
            raise ProviderError(
                error.message, code=error.code, retryable=error.retryable, provider=self._provider
            )
        if self._error is None:
            self._error = error

    def _thought_block(self) -> _ThoughtBlock:
        """The open reasoning block (a new one when the last was closed by a signature)."""
        if self._thoughts and not self._thoughts[-1].closed:
            return self._thoughts[-1]
        block = _ThoughtBlock()
        if self._thoughts is _NO_LIST:
            self._thoughts = []
        self._thoughts.append(block)
        return block

    def _error_fields(self) -> tuple[str | None, str | None]:
        if self._error is not None:
            return self._error.code or "PROVIDER_ERROR", self._error.message
        reason = self._finish_reason
        if reason is not None and reason is not FinishReason.STOP:
            return reason.value, _FINISH_MESSAGES.get(reason, f"the model stopped: {reason.value}")
        if self._refusal:
            return "REFUSAL", "".join(self._refusal)
        return None, None

    def _parse_call(self, buffer: _ToolCallBuffer, *, tolerate: bool) -> FunctionCall | None:
        if buffer.call is not None:
            return buffer.call
        name = buffer.name or ""
        raw = "".join(buffer.arguments)
        call: FunctionCall | None = None
        try:
            args = json.loads(raw, parse_constant=_refuse_constant) if raw.strip() else {}
        except RecursionError:  # the C decoder recurses per nesting level
            reason: str | None = "the arguments nest too deeply"
        except ValueError as exc:
            reason = str(exc)
        else:
            if not isinstance(args, dict):
                reason = f"expected a JSON object, got {type(args).__name__}"
            elif not name:
                reason = "the provider never sent the function name"
            else:
                try:
                    call = FunctionCall(id=buffer.id, name=name, args=args)
                    reason = None
                except ValidationError as exc:  # e.g. nesting deeper than pydantic's JSON recursion limit
                    reason = f"the arguments are not a valid JSON value: {exc.errors()[0]['msg']}"
        if call is None:
            if tolerate:
                return None
            raise MalformedFunctionCallError(name or "<unnamed>", raw, reason or "invalid", provider=self._provider)
        if buffer.complete:
            buffer.call = call  # no more fragments can change it
        return call


def _refuse_constant(name: str) -> object:
    """``json.loads`` accepts ``NaN``, ``Infinity`` and ``-Infinity``; JSON does not, and a tool
    must never receive them: a call whose arguments hold one is malformed (merge rule 7)."""
    raise ValueError(f"{name} is not a JSON value")
