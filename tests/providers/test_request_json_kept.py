"""The OpenAI Chat, Anthropic and Gemini mappers keep the JSON of a config's members (system
message, tools, options) per config object: the bytes they send must be exactly what encoding the
body dict gives, whatever changes between requests (the tool list, the instruction, a schema edited
in place, the options), and a request they cannot build must fail as the dict path fails."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from rxllm import (
    ConfigurationError,
    Content,
    FunctionCallingConfig,
    FunctionCallingConfigMode,
    FunctionDeclaration,
    GenerateContentConfig,
    HttpOptions,
    LlmRequest,
    Part,
    Tool,
    ToolConfig,
)
from rxllm.providers._wire import JsonRequestMapper, body_json, json_text
from rxllm.providers.anthropic import AnthropicRequestMapper
from rxllm.providers.gemini import GeminiRequestMapper
from rxllm.providers.openai import OpenAiChatRequestMapper

MAPPERS = {
    "openai": lambda **kw: OpenAiChatRequestMapper(base_url="https://api.example/v1", api_key="sk-test", **kw),
    "anthropic": lambda **kw: AnthropicRequestMapper(api_key="sk-ant-test", **kw),
    "gemini": lambda **kw: GeminiRequestMapper(api_key="g-test", **kw),
}


@pytest.fixture(params=sorted(MAPPERS))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)

INSTRUCTION = "You answer questions about orders. Use get_order to look orders up."


def _declaration(name: str = "get_order", **overrides: Any) -> FunctionDeclaration:
    fields: dict[str, Any] = {
        "name": name,
        "description": "Look an order up by its id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": 'The order\'s id, like "A17".'}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
    }
    fields.update(overrides)
    return FunctionDeclaration(**fields)


def _config(*declarations: FunctionDeclaration, instruction: str | None = INSTRUCTION, **options: Any
            ) -> GenerateContentConfig:
    tools = (Tool(function_declarations=declarations),) if declarations else None
    return GenerateContentConfig(system_instruction=instruction, tools=tools, **options)


def _history() -> tuple[Content, ...]:
    call = Part.from_function_call("get_order", {"order_id": "A17"}, id="call_1")
    result = Part.from_function_response("get_order", {"status": "shipped", "city": "Köln"}, id="call_1")
    return (
        Content(role="user", parts=(Part.from_text("Where is order A17?"),)),
        Content(role="model", parts=(Part.from_text("Let me look that up."), call)),
        Content(role="user", parts=(result,)),
    )


def _body_dict(mapper: JsonRequestMapper, request: LlmRequest, stream: bool) -> Any:
    if isinstance(mapper, OpenAiChatRequestMapper):
        return mapper.to_body(request, model="gpt-test", stream=stream)
    if isinstance(mapper, AnthropicRequestMapper):
        return mapper._body(request, model="gpt-test", stream=stream)
    assert isinstance(mapper, GeminiRequestMapper)
    return mapper._body(request)


def _reference(mapper: JsonRequestMapper, request: LlmRequest, *, stream: bool = True) -> bytes:
    """What the mapper sent before it kept anything: the body dict, encoded (no extra body)."""
    body = _body_dict(mapper, request, stream)
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigurationError(f"the request cannot be encoded as JSON: {exc}", provider=mapper.provider) from exc


def _sent(mapper: Any, request: LlmRequest, *, stream: bool = True) -> bytes:
    body: bytes = mapper.to_http_request(request, model="gpt-test", stream=stream).body
    return body


def _assert_same(mapper: JsonRequestMapper, request: LlmRequest, *, stream: bool = True) -> bytes:
    expected = _reference(MAPPERS[mapper.provider](), request, stream=stream)  # a fresh mapper: nothing kept
    sent = _sent(mapper, request, stream=stream)
    assert sent == expected
    assert _sent(mapper, request, stream=stream) == expected  # and again, from what the mapper kept
    return sent


def _spliced(mapper: Any, request: LlmRequest) -> str | None:
    if isinstance(mapper, GeminiRequestMapper):
        return mapper._spliced_json(request)  # type: ignore[no-any-return]
    return mapper._spliced_json(request, "gpt-test", True)  # type: ignore[no-any-return]


def test_an_agents_two_steps_send_the_bytes_of_the_body_dict(provider: str) -> None:
    mapper = MAPPERS[provider]()
    config = _config(_declaration())
    first = LlmRequest(contents=_history()[:1], config=config)
    second = LlmRequest(contents=_history(), config=config)
    for _ in range(3):
        _assert_same(mapper, first)
        body = _assert_same(mapper, second)
    assert _spliced(mapper, second) == body.decode()  # the kept path, not the dict path
    assert INSTRUCTION in body.decode() and '"get_order"' in body.decode()
    if provider == "openai":
        decoded = json.loads(body)
        assert decoded["messages"][0] == {"role": "system", "content": INSTRUCTION}
        assert [m["role"] for m in decoded["messages"]] == ["system", "user", "assistant", "tool"]


def test_a_changed_tool_list_or_instruction_is_sent_as_changed(provider: str) -> None:
    mapper = MAPPERS[provider]()
    contents = _history()
    configs = [
        _config(_declaration()),
        _config(_declaration(), _declaration("cancel_order", description="Cancel an order.")),
        _config(_declaration("cancel_order", parameters=None)),
        _config(_declaration(), instruction="Answer in German: Grüße, Köln."),
        _config(_declaration(), instruction=None),
        _config(instruction="Only an instruction."),
        _config(_declaration(description=None), instruction=""),
    ]
    bodies = set()
    for config in configs * 2:  # each config again after the others: what was kept is per config
        bodies.add(_assert_same(mapper, LlmRequest(contents=contents, config=config)))
    assert len(bodies) == len(configs)


def test_parameters_edited_in_place_are_sent_as_edited(provider: str) -> None:
    mapper = MAPPERS[provider]()
    declaration = _declaration()
    request = LlmRequest(contents=_history(), config=_config(declaration))
    before = _assert_same(mapper, request)
    assert declaration.parameters is not None
    declaration.parameters["required"] = []  # the dict inside the frozen declaration can change
    after = _assert_same(mapper, request)
    assert after != before and b'"required":[]' in after
    declaration.parameters["additionalProperties"] = 1  # equal to True, but not the same JSON
    assert b'"additionalProperties":1' in _assert_same(mapper, request)


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 0.25, "top_p": 0.9, "top_k": 5, "seed": 7, "max_output_tokens": 64, "candidate_count": 1},
        {"stop_sequences": ("END", "Ende"), "response_mime_type": "application/json"},
        {"response_mime_type": "text/plain"},
        {"tool_config": ToolConfig(function_calling_config=FunctionCallingConfig(mode=FunctionCallingConfigMode.ANY))},
        {"tool_config": ToolConfig(function_calling_config=FunctionCallingConfig(
            mode=FunctionCallingConfigMode.ANY, allowed_function_names=("get_order",)))},
        {"tool_config": ToolConfig(function_calling_config=FunctionCallingConfig(
            mode=FunctionCallingConfigMode.AUTO, allowed_function_names=("cancel_order",)))},
        {"tool_config": ToolConfig(function_calling_config=FunctionCallingConfig(
            mode=FunctionCallingConfigMode.NONE, parallel_tool_calls=False))},
        {"http_options": HttpOptions(headers={"X-Trace": "1"})},
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_options_tool_choice_and_headers_match_the_dict_path(
    provider: str, options: dict[str, Any], stream: bool
) -> None:
    mapper = MAPPERS[provider]()
    config = _config(_declaration(), _declaration("cancel_order", description="Stornieren."), **options)
    request = LlmRequest(contents=_history(), config=config)
    try:
        _reference(MAPPERS[provider](), request, stream=stream)
    except ConfigurationError as refused:  # an option this provider refuses: refused the same way
        with pytest.raises(ConfigurationError) as raised:
            _sent(mapper, request, stream=stream)
        assert str(raised.value) == str(refused)
        return
    _assert_same(mapper, request, stream=stream)
    sent = mapper.to_http_request(request, model="gpt-test", stream=stream)  # type: ignore[attr-defined]
    if "http_options" in options:
        assert sent.headers["X-Trace"] == "1"
    assert sent.headers["accept"] == ("text/event-stream" if stream else "application/json")


def test_system_contents_and_an_empty_history_match_the_dict_path(provider: str) -> None:
    mapper = MAPPERS[provider]()
    config = _config(_declaration())
    system_turn = Content(role="system", parts=(Part.from_text("Be brief."),))
    for contents in [(), (system_turn,), (system_turn, *_history())]:
        _assert_same(mapper, LlmRequest(contents=contents, config=config))
    _assert_same(mapper, LlmRequest(contents=(system_turn,), config=_config(instruction=None, temperature=0.0)))


def test_an_extra_body_is_merged_as_before(provider: str) -> None:
    mapper = MAPPERS[provider](extra_body={"tools": [{"type": "x"}], "ignore_eos": True})
    request = LlmRequest(contents=_history(), config=_config(_declaration()))
    body = json.loads(_sent(mapper, request))
    assert body["ignore_eos"] is True and '"get_order"' in json.dumps(body["tools"])  # rxllm's tools kept
    plain = MAPPERS[provider]()
    with_request_extra = LlmRequest(contents=_history(), config=_config(
        _declaration(), http_options=HttpOptions(extra_body={"provider": {"order": ["a"]}})))
    assert json.loads(_sent(plain, with_request_extra))["provider"] == {"order": ["a"]}
    _assert_same(plain, request)  # the request's extra body left nothing behind


@pytest.mark.parametrize(
    "config, contents",
    [
        (_config(_declaration(), temperature=float("nan")), _history()),
        (_config(_declaration(), instruction="lone \ud800 surrogate"), _history()),
        (_config(_declaration(), tool_config=ToolConfig(function_calling_config=FunctionCallingConfig(
            mode=FunctionCallingConfigMode.VALIDATED))), _history()),
        (_config(_declaration(), response_mime_type="text/x-markdown"), _history()),
        (_config(_declaration()), (Content(role="critic", parts=(Part.from_text("?"),)),)),
        (_config(_declaration(), response_mime_type="text/x-markdown"), (Content(role="critic", parts=()),)),
    ],
)
def test_a_request_that_cannot_be_built_fails_as_the_dict_path_fails(
    provider: str, config: GenerateContentConfig, contents: tuple[Content, ...]
) -> None:
    request = LlmRequest(contents=contents, config=config)
    mapper = MAPPERS[provider]()
    try:
        expected = _reference(MAPPERS[provider](), request)
    except ConfigurationError as refused:
        for _ in range(2):
            with pytest.raises(ConfigurationError) as raised:
                _sent(mapper, request)
            assert str(raised.value) == str(refused)
        return
    assert _sent(mapper, request) == expected == _sent(mapper, request)  # a provider that takes it


def test_what_is_kept_is_bounded_and_stays_right(provider: str) -> None:
    mapper: Any = MAPPERS[provider]()
    contents = _history()
    configs = [_config(_declaration(), instruction=f"Instruction {n}") for n in range(60)]
    for config in configs:
        _assert_same(mapper, LlmRequest(contents=contents, config=config))
    assert len(mapper._kept) <= 16
    _assert_same(mapper, LlmRequest(contents=contents, config=configs[0]))


def test_a_config_is_not_kept_alive_by_the_mapper(provider: str) -> None:
    import gc
    import weakref

    mapper: Any = MAPPERS[provider]()
    config = _config(_declaration())
    _assert_same(mapper, LlmRequest(contents=_history(), config=config))
    assert len(mapper._kept) == 1
    gone = weakref.ref(config)
    del config
    gc.collect()
    assert gone() is None and len(mapper._kept) == 0
    _assert_same(mapper, LlmRequest(contents=_history(), config=_config(_declaration())))


def test_threads_sharing_a_mapper_each_send_their_own_body(provider: str) -> None:
    mapper = MAPPERS[provider]()
    contents = _history()
    configs = [_config(_declaration(), instruction=f"Agent {n}") for n in range(24)]  # more than are kept
    expected = {id(c): _reference(MAPPERS[provider](), LlmRequest(contents=contents, config=c)) for c in configs}
    start = threading.Barrier(4)
    wrong: list[str] = []

    def work(offset: int) -> None:
        start.wait()
        for round_ in range(50):
            config = configs[(offset + round_) % len(configs)]
            if _sent(mapper, LlmRequest(contents=contents, config=config)) != expected[id(config)]:
                wrong.append(f"thread {offset} round {round_}")

    threads = [threading.Thread(target=work, args=(n * 5,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_the_shared_encoders_write_what_json_dumps_writes() -> None:
    value = {"city": "Köln", "n": [1, 2.5, True, None], "nested": {"quote": '"', "emoji": "\U0001f600"}}
    assert body_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert json_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert json_text(float("nan")) == "NaN"
    with pytest.raises(ValueError):
        body_json(float("inf"))
