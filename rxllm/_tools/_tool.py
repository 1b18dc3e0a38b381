"""Tools: ``BaseTool`` and ``FunctionTool``, a plain Python function the model may call.

``FunctionTool`` derives the tool's :class:`~rxllm.FunctionDeclaration` from the function: the
name, the docstring's summary as description, and a JSON schema of the parameters built by
pydantic from the signature and type hints, with each parameter's description taken from the
Google-style docstring's ``Args:`` section.

>>> from rxllm.agents import FunctionTool
>>> def get_order(order_id: str, verbose: bool = False) -> dict[str, str]:
...     '''Look an order up.
...
...     Args:
...         order_id: The order's id, like "A17".
...         verbose: Include the full history.
...     '''
...     return {"status": "shipped"}
>>> declaration = FunctionTool(get_order).declaration()
>>> declaration.name, declaration.description, declaration.parameters["required"]
('get_order', 'Look an order up.', ['order_id'])
>>> declaration.parameters["properties"]["order_id"]
{'description': 'The order\\'s id, like "A17".', 'type': 'string'}

Outcomes (the same for every tool, decided in ``rxllm._tools._calls``): a tool that raises, whose
arguments fail validation, that returns something that is not JSON, or that the model named but
the agent does not have, does not fail the run. The function-response event carries
``{"error": "<message>"}`` for that call so the model can recover, and the error is logged
(logger ``rxllm.agents``, level WARNING).
"""

from __future__ import annotations

import abc
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import reactivex
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from reactivex import abc as rx_abc
from reactivex import operators as ops

from .._core.errors import ConfigurationError, ToolError
from .._core.types import FunctionDeclaration, LlmRequest
from .._rx.direct import defer_now, emit_now
from ._context import ToolContext
from ._loops import check_timeout, coroutine_observable
from ._named import Named

__all__ = [
    "BaseTool",
    "FunctionTool",
    "ToolLike",
    "as_tool",
    "describe_validation_error",
    "tools_by_name",
]

ToolResult = dict[str, Any]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|Attributes|"
    r"See Also|Warnings?|Todo)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<desc>.*)$")


class BaseTool(Named, abc.ABC):
    """A tool the model may call, as ADK's ``BaseTool``.

    Args:
        name: the name the model calls it by (letters, digits, ``_.:-``; at most 64).
        description: what it does, for the model.
        timeout: seconds one call may take before it ends with an error result the model sees
            (:class:`~rxllm.ToolTimeoutError`); None (the default) uses the runtime's default
            (``Runner(..., tool_timeout=)``, ``AiService(..., tool_timeout=)``), which is no limit
            unless set.
    """

    def __init__(self, *, name: str, description: str = "", timeout: float | None = None) -> None:
        if not _NAME.match(name):
            raise ConfigurationError(
                f"tool name {name!r} is not usable: start with a letter or underscore, then letters, digits "
                "or _.:- (at most 64 characters)"
            )
        check_timeout(timeout, f"timeout of tool {name!r}")
        super().__init__(name, description)
        self._timeout = timeout

    @property
    def timeout(self) -> float | None:
        """Seconds one call may take; None to use the runtime's default."""
        return getattr(self, "_timeout", None)  # a subclass that skipped __init__ has none

    def declaration(self) -> FunctionDeclaration | None:
        """The declaration sent to the model, or None for a tool the model is not told about."""
        return None

    def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> object:
        """Edit the request the agent is about to send (ADK Java's ``BaseTool.processLlmRequest``).

        Called before every model call of an agent that has the tool, tool by tool in the agent's
        order (a toolset's tools after the toolset's own hook), after the request is built and before the
        before-model callbacks; each tool sees the request as the tools before it left it. Return
        None to leave it as it is, or a new :class:`~rxllm.LlmRequest` to send instead (requests
        are immutable: ``llm_request.append_instructions(...)``, ``llm_request.model_copy(...)``);
        or an Observable of zero or one request, or be ``async def``. ``tool_context`` is the
        step's: state set through it is recorded on the step's next stored event; it answers no
        call (``function_call_id`` is None).

        The tool's own declaration is already in the request: rxllm adds every tool's
        :meth:`declaration` (where ADK Java's base implementation appends it here). The default
        changes nothing. Called by keyword, so an override may take ``(self, llm_request,
        tool_context)`` (ADK Java's order) or ADK Python's keyword-only signature.
        """
        return None

    @abc.abstractmethod
    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[ToolResult]:
        """Run the tool with the model's arguments.

        Returns a cold Observable that emits the tool's result (a JSON-able dict) once and
        completes, or fails; subscribing runs the tool. Disposing it abandons the result (a
        running synchronous function cannot be interrupted). The runtimes call and subscribe it
        on a tool worker thread (see ``rxllm._tools._execution``), so blocking here blocks no
        stream.
        """


def _docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its ``Args:`` entries."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    index = 0
    while index < len(lines) and not _SECTION.match(lines[index].strip()):
        summary.append(lines[index])
        index += 1
    while index < len(lines):
        header = lines[index].strip()
        header_indent = len(lines[index]) - len(lines[index].lstrip())
        index += 1
        in_args = header.split(":")[0] in {"Args", "Arguments", "Parameters", "Params"}
        current: str | None = None
        entry_indent = 0
        while index < len(lines):
            line = lines[index]
            stripped = line.strip()
            indent = len(line) - len(line.lstrip())
            if stripped and indent <= header_indent:
                break
            index += 1
            if not in_args or not stripped:
                continue
            match = _ARG_LINE.match(stripped)
            if match and (current is None or indent <= entry_indent):
                current = match.group("name")
                entry_indent = indent
                args[current] = match.group("desc").strip()
            elif current is not None:
                args[current] = (args[current] + " " + stripped).strip()
    return "\n".join(summary).strip(), args


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys from a JSON schema (never a property named title)."""
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``field: message``."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


SUBSCRIBE_RUN: Any = object()
"""What :meth:`FunctionTool._run_now` returns when its ``run`` Observable must be subscribed instead."""


class FunctionTool(BaseTool):
    """A plain Python function as a tool (ADK's ``FunctionTool``).

    The function may take a parameter named ``tool_context`` (or annotated ``ToolContext``): it
    gets the :class:`ToolContext` and is left out of the declaration. Its other parameters are
    validated by pydantic before the call (unknown arguments are rejected unless it takes
    ``**kwargs``); validated values are passed (so ``"5"`` becomes ``5`` for an ``int``). The
    return value may be an Observable (its last item is the result). A function that returns
    None (or an Observable that completes empty) answers ``{}``, as ADK Java's ``FunctionTool``;
    another result that is not a dict is wrapped as ``{"result": value}``, as ADK does; a dict
    is returned as is. Results are
    made JSON-able with pydantic (models, dates and the like are converted); a result JSON
    cannot carry (``NaN``, an int too large for the encoder, an arbitrary object) becomes an
    error result for that call.

    Where it runs: under a runtime (``Runner``, ``AiService``) a synchronous function runs on the
    runtime's tool worker pool, never on the thread that delivered the model's response; an
    ``async def`` function is awaited on the loop the run was subscribed from (else rxllm's tool
    loop) and cancelled when the run is disposed. Called directly (``tool.run(...)``) a
    synchronous function runs on the subscribing thread.

    Args:
        func: the function: synchronous, ``async def``, or returning an Observable.
        name: the tool's name; the function's ``__name__`` by default.
        description: the tool's description; the docstring's summary by default.
        scheduler: where a synchronous function runs, when it should not run on the runtime's
            pool (e.g. a dedicated ``ThreadPoolScheduler``). A running function is not
            interrupted by disposal or a timeout; its result is dropped.
        timeout: seconds one call may take (see :class:`BaseTool`).
        require_confirmation: ask the client to confirm every call before the function runs (ADK
            Java's ``FunctionTool.create(method, requireConfirmation)``): the first run asks
            (``tool_context.request_confirmation``) and answers ``{"error": "This tool call requires
            confirmation, please approve or reject."}``; once the client answered, the call runs
            again and the function runs if confirmed, else it answers ``{"error": "This tool call is
            rejected."}``. See ``rxllm._tools._confirmation``.

    Raises:
        ConfigurationError: for an async generator function, ``*args``, an unusable name, a
            timeout that is not a positive number, or type hints pydantic cannot build a schema for.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        scheduler: rx_abc.SchedulerBase | None = None,
        timeout: float | None = None,
        require_confirmation: bool = False,
    ) -> None:
        if not callable(func):
            raise ConfigurationError(f"FunctionTool needs a callable, got {type(func).__name__}")
        if inspect.isasyncgenfunction(func):
            raise ConfigurationError(
                f"{getattr(func, '__name__', func)!r} is an async generator function: a tool returns one "
                "result (use an async def function, or return an Observable)"
            )
        tool_name = name or getattr(func, "__name__", None) or type(func).__name__
        summary, arg_docs = _docstring_parts(inspect.getdoc(func))
        super().__init__(name=tool_name, description=summary if description is None else description, timeout=timeout)
        self._func = func
        self._scheduler = scheduler
        self._require_confirmation = bool(require_confirmation)
        try:
            signature = inspect.signature(func)
            hints = typing.get_type_hints(func, include_extras=True)
        except (TypeError, ValueError, NameError) as exc:
            raise ConfigurationError(f"cannot read the signature of tool {tool_name!r}: {exc}") from exc
        self._context_param: str | None = None
        self._positional: list[tuple[str, str]] = []  # (field, parameter) passed positionally
        self._keyword: list[tuple[str, str]] = []
        self._takes_kwargs = False
        fields: dict[str, Any] = {}
        for position, (param_name, param) in enumerate(signature.parameters.items()):
            annotation = hints.get(param_name, Any)
            if param_name == "tool_context" or annotation is ToolContext:
                self._context_param = param_name
                continue
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                raise ConfigurationError(f"tool {tool_name!r}: *{param_name} cannot be declared to a model")
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                self._takes_kwargs = True
                continue
            field_name = f"p{position}"
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[field_name] = (annotation, Field(default, alias=param_name, description=arg_docs.get(param_name)))
            target = self._positional if param.kind is inspect.Parameter.POSITIONAL_ONLY else self._keyword
            target.append((field_name, param_name))
        config = ConfigDict(
            extra="allow" if self._takes_kwargs else "forbid",
            validate_by_alias=True,
            validate_by_name=False,
            arbitrary_types_allowed=False,
        )
        try:
            self._args_model: type[BaseModel] = create_model(f"{tool_name}_arguments", __config__=config, **fields)
            schema = self._args_model.model_json_schema(by_alias=True)
        except Exception as exc:  # pydantic's schema errors have several types
            raise ConfigurationError(
                f"cannot build a JSON schema for the parameters of tool {tool_name!r}: {exc}"
            ) from exc
        self._parameters: dict[str, Any] = _strip_titles(schema)

    @property
    def func(self) -> Callable[..., Any]:
        """The wrapped function."""
        return self._func

    @property
    def require_confirmation(self) -> bool:
        """Whether every call waits for the client's confirmation before the function runs."""
        return getattr(self, "_require_confirmation", False)  # a subclass that skipped __init__ has none

    def declaration(self) -> FunctionDeclaration:
        """The declaration built from the function."""
        return FunctionDeclaration(name=self.name, description=self.description or None, parameters=self._parameters)

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[ToolResult]:
        """Validate ``args``, call the function, emit its wrapped result.

        Fails with :class:`~rxllm.ToolError` when the arguments do not validate or the function
        raises (the flow turns that into an ``{"error": ...}`` response). With
        ``require_confirmation`` the function runs only once the client confirmed the call.
        """
        if self.require_confirmation:
            confirmation = tool_context.tool_confirmation
            if confirmation is None:
                tool_context.request_confirmation(
                    f"Please approve or reject the tool call {self.name}() by responding with a FunctionResponse "
                    "with an expected ToolConfirmation payload."
                )
                return emit_now({"error": "This tool call requires confirmation, please approve or reject."})
            if not confirmation.confirmed:
                return emit_now({"error": "This tool call is rejected."})

        if self._scheduler is None:  # called during subscribe, its result (or its error) passed on at once
            return defer_now(lambda: self._result_of(self._call_function(args, tool_context)))
        return reactivex.from_callable(partial(self._call_function, args, tool_context), self._scheduler).pipe(
            ops.flat_map(self._result_of)
        )

    def _run_now(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """For a runtime that would subscribe ``run(args, tool_context)`` at once, on this thread: the
        function called now, what it returned (``_result_of`` makes the result of it); or
        :data:`SUBSCRIBE_RUN` when ``run``'s Observable must be subscribed instead (a call that
        waits for confirmation, a tool with its own scheduler). Raises what that Observable would
        fail with (or ``run`` raise). No Observable is made for the usual call."""
        if self.require_confirmation or self._scheduler is not None:
            return SUBSCRIBE_RUN
        return self._call_function(args, tool_context)

    def _call_function(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Validate ``args`` and call the function with them (and ``tool_context``), on this thread."""
        try:
            validated = self._args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments for tool {self.name!r}: {describe_validation_error(exc)}") from exc
        positional: Iterable[Any] = [getattr(validated, f) for f, _ in self._positional] if self._positional else ()
        keyword: dict[str, Any] = {}
        for field, param in self._keyword:  # (a loop: no comprehension's call per tool call)
            keyword[param] = getattr(validated, field)
        if self._takes_kwargs and validated.model_extra:
            keyword.update(validated.model_extra)
        if self._context_param is not None:
            keyword[self._context_param] = tool_context
        try:
            return self._func(*positional, **keyword)
        except BaseException as exc:  # SystemExit (argparse on bad input) too: see rxllm._tools._execution
            raise ToolError(f"tool {self.name!r} raised {type(exc).__name__}: {exc}") from exc

    def _result_of(self, value: Any) -> reactivex.Observable[ToolResult]:
        if type(value) is dict:  # (the usual result: neither a coroutine nor an Observable, a Mapping)
            return emit_now(dict(value))
        if isinstance(value, types.CoroutineType):  # (inspect.iscoroutine, without its call)
            value = coroutine_observable(value)
        if isinstance(value, reactivex.Observable):
            return value.pipe(ops.to_list(), ops.map(self._last_wrapped), ops.catch(self._wrap_error))
        return emit_now(_wrap(value))

    def _last_wrapped(self, values: list[Any]) -> ToolResult:
        return _wrap(values[-1] if values else None)

    def _wrap_error(self, error: Exception, _: reactivex.Observable[ToolResult]) -> reactivex.Observable[ToolResult]:
        if isinstance(error, ToolError):
            raise error
        raise ToolError(f"tool {self.name!r} failed with {type(error).__name__}: {error}") from error


def _wrap(value: Any) -> ToolResult:
    if value is None:  # ADK Java's FunctionTool: a function that returns nothing answers an empty map
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {"result": value}


ToolLike = BaseTool | Callable[..., Any]
"""What ``LlmAgent(tools=...)`` accepts: tools, or plain callables (wrapped in :class:`FunctionTool`)."""


def as_tool(tool: ToolLike) -> BaseTool:
    """``tool`` itself if it is a :class:`BaseTool`, else a :class:`FunctionTool` wrapping the callable."""
    if isinstance(tool, BaseTool):
        return tool
    if callable(tool):
        return FunctionTool(tool)
    raise ConfigurationError(f"a tool must be a BaseTool or a callable, got {type(tool).__name__}")


def tools_by_name(tools: Iterable[ToolLike], owner: str) -> dict[str, BaseTool]:
    """The tools (callables wrapped by :func:`as_tool`) by name, in the order given.

    Args:
        tools: what the owner was given.
        owner: who has the tools, for the error message (``"LlmAgent 'support'"``).

    Raises:
        ConfigurationError: for something that is not a tool, or two tools with one name.
    """
    by_name: dict[str, BaseTool] = {}
    for tool in map(as_tool, tools):
        if tool.name in by_name:
            raise ConfigurationError(f"{owner} has two tools named {tool.name!r}")
        by_name[tool.name] = tool
    return by_name
