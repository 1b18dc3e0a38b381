"""Every public class and function names its front door as its module (``rxllm.ConfigurationError``,
``rxllm.agents.LlmAgent``), and what reads ``__module__`` keeps working: pickles, type hints,
pydantic schemas, subclassing, doctests (``test_public_api``), tracebacks."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import traceback
import typing
from pathlib import Path
from types import ModuleType

import pydantic
import pytest

import rxllm
import rxllm.agents
import rxllm.operators
import rxllm.service
import rxllm.testing

FRONT_DOORS = (
    "rxllm",
    "rxllm.aio",
    "rxllm.agents",
    "rxllm.operators",
    "rxllm.providers",
    "rxllm.providers.anthropic",
    "rxllm.providers.gemini",
    "rxllm.providers.openai",
    "rxllm.service",
    "rxllm.testing",
)

WITHOUT_A_MODULE_OF_THEIR_OWN = {
    # constants, type aliases and instances: their ``__module__`` (if any) is their type's
    "rxllm": {"INVALID_STRUCTURED_OUTPUT", "ModelStreamEvent", "Prompt", "ResponseSchema"},
    "rxllm.aio": {"DEFAULT_MAX_BUFFER"},
    "rxllm.agents": {
        "AfterModelCallback",
        "AfterToolCallback",
        "AgentCallback",
        "BeforeModelCallback",
        "BeforeToolCallback",
        "IncludeContents",
        "InstructionProvider",
        "LlmFactory",
        "OnModelErrorCallback",
        "OnToolErrorCallback",
        "STATE_REMOVED",
        "ToolLike",
        "exit_loop",
        "load_memory",
    },
    "rxllm.operators": set(),
    "rxllm.providers": set(),
    "rxllm.providers.anthropic": {"DEFAULT_BASE_URL"},
    "rxllm.providers.gemini": {"DEFAULT_BASE_URL"},
    "rxllm.providers.openai": {"DEFAULT_BASE_URL", "REALTIME_BASE_URL"},
    "rxllm.service": {
        "AiServiceStreamingEvent",
        "DEFAULT_BUFFER_SIZE",
        "DEFAULT_MAX_ROUNDS",
        "OutputGuardrail",
        "Retriever",
    },
    "rxllm.testing": {"LiveStep", "PROTOCOLS", "Step", "gemini", "openai"},
}


def _exports(front_door: str) -> list[tuple[str, object]]:
    module: ModuleType = importlib.import_module(front_door)
    return [(name, getattr(module, name)) for name in module.__all__]


def _has_own_module(value: object) -> bool:
    return inspect.isclass(value) or inspect.isfunction(value)


@pytest.mark.parametrize("front_door", FRONT_DOORS)
def test_every_public_class_and_function_names_its_front_door(front_door: str) -> None:
    wrong = {name: getattr(value, "__module__", None) for name, value in _exports(front_door) if _has_own_module(value)}
    assert {name: module for name, module in wrong.items() if module != front_door} == {}
    others = {name for name, value in _exports(front_door) if not _has_own_module(value)}
    assert others == WITHOUT_A_MODULE_OF_THEIR_OWN[front_door]


@pytest.mark.parametrize("front_door", FRONT_DOORS)
def test_the_methods_of_a_public_class_name_its_front_door_too(front_door: str) -> None:
    # doctest collects a method's examples only where its class's module is
    wrong = [
        f"{name}.{member}: {function.__module__}"
        for name, value in _exports(front_door)
        if inspect.isclass(value)
        for member, function in vars(value).items()
        if inspect.isfunction(function)
        and function.__code__.co_filename.startswith(str(Path(rxllm.__file__).parent))  # not generated ones
        and function.__module__ != front_door
    ]
    assert wrong == []


def test_the_examples_of_the_brief() -> None:
    import rxllm.aio
    import rxllm.providers.anthropic
    import rxllm.providers.gemini
    import rxllm.providers.openai

    assert rxllm.HttpTransport.__module__ == "rxllm"
    assert rxllm.agents.LlmAgent.__module__ == "rxllm.agents"
    assert rxllm.service.AiService.__module__ == "rxllm.service"
    assert rxllm.operators.hedge.__module__ == "rxllm.operators"
    assert rxllm.testing.ScriptedLlm.__module__ == "rxllm.testing"
    assert rxllm.aio.iterate.__module__ == "rxllm.aio"
    assert rxllm.providers.openai.OpenAiChatModel.__module__ == "rxllm.providers.openai"
    assert rxllm.providers.anthropic.AnthropicModel.__module__ == "rxllm.providers.anthropic"
    assert rxllm.providers.gemini.GeminiModel.__module__ == "rxllm.providers.gemini"
    assert repr(rxllm.ConfigurationError) == "<class 'rxllm.ConfigurationError'>"


def test_a_traceback_names_the_error_by_its_public_path() -> None:
    try:
        raise rxllm.ConfigurationError("no API key")
    except rxllm.ConfigurationError as exc:
        assert traceback.format_exception_only(exc) == ["rxllm.ConfigurationError: no API key\n"]


@pytest.mark.parametrize(
    "error",
    [
        rxllm.ConfigurationError("no API key", provider="openai"),
        rxllm.HttpStatusError(429, provider_message="slow down", request_id="r1", retry_after=2.0, provider="openai"),
        rxllm.StreamTimeoutError("no first item in 5 s", limit="first_item", retryable=False),
        rxllm.ContractViolationError("two final responses", rule="one-final"),
        rxllm.MalformedFunctionCallError("get_order", '{"order_id":', "not a JSON object"),
        rxllm.ResponseTooLargeError("body past 10 bytes", limit_bytes=10),
        rxllm.ToolTimeoutError("get_order ran past 1 s"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_errors_survive_a_pickle_round_trip_by_their_public_path(error: rxllm.RxLlmError) -> None:
    data = pickle.dumps(error)
    assert f"rxllm\n{type(error).__name__}".encode() in pickle.dumps(error, protocol=0)
    restored = pickle.loads(data)
    assert type(restored) is type(error)
    assert (str(restored), restored.args, vars(restored)) == (str(error), error.args, vars(error))
    assert restored.retryable == error.retryable


def test_values_and_functions_survive_a_pickle_round_trip() -> None:
    request = rxllm.LlmRequest(contents=(rxllm.Content(role="user", parts=(rxllm.Part.from_text("Hi"),)),))
    values = [
        request,
        rxllm.Chunk(text_delta="Hel", tool_call_fragments=(rxllm.ToolCallFragment(0, "call_1", "get", "{}"),)),
        rxllm.FinishReason.STOP,
        rxllm.agents.Event(author="user", content=request.contents[0]),
        rxllm.agents.RunConfig(streaming_mode=rxllm.agents.StreamingMode.SSE),
        rxllm.agents.MemoryEntry(content=request.contents[0], author="user"),
        rxllm.operators.final,
        rxllm.agents.LlmAgent,
    ]
    for value in values:
        assert pickle.loads(pickle.dumps(value)) == value


def test_pydantic_schemas_keep_their_titles_and_definitions() -> None:
    schema = rxllm.LlmRequest.model_json_schema()
    assert schema["title"] == "LlmRequest"
    assert {"Content", "Part", "GenerateContentConfig"} <= set(schema["$defs"])
    assert rxllm.agents.Event.model_json_schema()["title"] == "Event"
    assert rxllm.agents.SearchMemoryResponse.model_json_schema()["$defs"]["MemoryEntry"]["title"] == "MemoryEntry"


@pytest.mark.parametrize("front_door", FRONT_DOORS)
def test_type_hints_of_public_classes_resolve(front_door: str) -> None:
    # get_type_hints evaluates string annotations in sys.modules[cls.__module__]: the front door
    failing = {}
    for name, value in _exports(front_door):
        if inspect.isclass(value):
            try:
                typing.get_type_hints(value)
            except NameError as exc:
                failing[name] = str(exc)
    assert failing == {}


def test_public_models_and_dataclasses_can_be_subclassed() -> None:
    class TaggedEvent(rxllm.agents.Event):
        tag: str = ""

    event = TaggedEvent(author="user", tag="audit")
    assert (event.author, event.tag) == ("user", "audit")
    assert TaggedEvent.model_validate_json(event.model_dump_json()) == event

    @dataclasses.dataclass(frozen=True)
    class LoggedRequest(rxllm.HttpRequest):
        note: str = ""

    assert set(typing.get_type_hints(LoggedRequest)) >= {"url", "note"}


def test_public_models_are_fully_built() -> None:
    # a model left incomplete would be rebuilt later in sys.modules[cls.__module__], the front door
    incomplete = [
        f"{front_door}.{name}"
        for front_door in FRONT_DOORS
        for name, value in _exports(front_door)
        if inspect.isclass(value) and issubclass(value, pydantic.BaseModel) and not value.__pydantic_complete__
    ]
    assert incomplete == []
