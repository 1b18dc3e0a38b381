"""``tool_config``, built-in tools and ``safety_settings`` as each request mapper sends them.

Every provider maps genai's function-calling modes to its own ``tool_choice`` (or Gemini's
``toolConfig``); what an API cannot express is a ``ConfigurationError`` naming the provider.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from rxllm import (
    AnthropicServerTool,
    ConfigurationError,
    FunctionCallingConfig,
    FunctionDeclaration,
    GenerateContentConfig,
    GoogleSearch,
    HttpOptions,
    LlmRequest,
    OpenAiFileSearch,
    OpenAiWebSearch,
    Part,
    RequestMapper,
    SafetySetting,
    Tool,
    ToolCodeExecution,
    ToolConfig,
    UrlContext,
)
from rxllm.providers._anthropic import AnthropicRequestMapper
from rxllm.providers._gemini import GeminiRequestMapper
from rxllm.providers._openai_chat import OpenAiChatRequestMapper
from rxllm.providers._openai_responses import OpenAiResponsesRequestMapper

from .contents import user

MAPPERS: dict[str, Callable[[], RequestMapper]] = {
    "openai-chat": lambda: OpenAiChatRequestMapper(base_url="https://x.example/v1", api_key="k"),
    "openai-responses": lambda: OpenAiResponsesRequestMapper(api_key="k"),
    "anthropic": lambda: AnthropicRequestMapper(api_key="k"),
    "gemini": lambda: GeminiRequestMapper(api_key="k"),
}
PROVIDER_NAME = {"openai-chat": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "gemini"}
FUNCTIONS = Tool(
    function_declarations=[
        FunctionDeclaration(name="get_order", parameters={"type": "object", "properties": {}}),
        FunctionDeclaration(name="cancel_order", parameters={"type": "object", "properties": {}}),
        FunctionDeclaration(name="refund", parameters={"type": "object", "properties": {}}),
    ]
)


def _body(name: str, **config: Any) -> dict[str, Any]:
    request = LlmRequest(contents=[user(Part.from_text("hi"))], config=GenerateContentConfig(**config))
    http = MAPPERS[name]().to_http_request(request, model="m", stream=True)
    body: dict[str, Any] = json.loads(http.body)
    return body


def _calling(mode: str | None = None, names: list[str] | None = None, **more: Any) -> ToolConfig:
    return ToolConfig(function_calling_config=FunctionCallingConfig(mode=mode, allowed_function_names=names, **more))


def _tool_names(name: str, body: dict[str, Any]) -> list[str]:
    if name == "gemini":
        return [d["name"] for tool in body.get("tools", []) for d in tool.get("functionDeclarations", [])]
    if name == "openai-chat":
        return [tool["function"]["name"] for tool in body.get("tools", [])]
    return [tool["name"] for tool in body.get("tools", []) if "name" in tool]


ALL = ["get_order", "cancel_order", "refund"]

# (mode, allowed names) -> the tool choice each provider sends, and the functions it offers.
CASES: list[tuple[str | None, list[str] | None, dict[str, tuple[Any, list[str]]]]] = [
    (None, None, {
        "openai-chat": (None, ALL), "openai-responses": (None, ALL), "anthropic": (None, ALL),
        "gemini": (None, ALL),
    }),
    ("AUTO", None, {
        "openai-chat": ("auto", ALL), "openai-responses": ("auto", ALL), "anthropic": ({"type": "auto"}, ALL),
        "gemini": ({"functionCallingConfig": {"mode": "AUTO"}}, ALL),
    }),
    ("NONE", None, {
        "openai-chat": ("none", ALL), "openai-responses": ("none", ALL), "anthropic": ({"type": "none"}, ALL),
        "gemini": ({"functionCallingConfig": {"mode": "NONE"}}, ALL),
    }),
    ("ANY", None, {
        "openai-chat": ("required", ALL), "openai-responses": ("required", ALL),
        "anthropic": ({"type": "any"}, ALL), "gemini": ({"functionCallingConfig": {"mode": "ANY"}}, ALL),
    }),
    ("ANY", ["refund"], {
        "openai-chat": ({"type": "function", "function": {"name": "refund"}}, ALL),
        "openai-responses": ({"type": "function", "name": "refund"}, ALL),
        "anthropic": ({"type": "tool", "name": "refund"}, ALL),
        "gemini": ({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["refund"]}}, ALL),
    }),
    ("ANY", ["refund", "get_order"], {
        "openai-chat": ("required", ["get_order", "refund"]),
        "openai-responses": ("required", ["get_order", "refund"]),
        "anthropic": ({"type": "any"}, ["get_order", "refund"]),
        "gemini": ({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["refund", "get_order"]}}, ALL),
    }),
    ("AUTO", ["cancel_order"], {
        "openai-chat": ("auto", ["cancel_order"]), "openai-responses": ("auto", ["cancel_order"]),
        "anthropic": ({"type": "auto"}, ["cancel_order"]),
        "gemini": ({"functionCallingConfig": {"mode": "AUTO"}}, ["cancel_order"]),
    }),
    (None, ["cancel_order"], {
        "openai-chat": (None, ["cancel_order"]), "openai-responses": (None, ["cancel_order"]),
        "anthropic": (None, ["cancel_order"]), "gemini": (None, ["cancel_order"]),
    }),
    ("MODE_UNSPECIFIED", None, {
        "openai-chat": (None, ALL), "openai-responses": (None, ALL), "anthropic": (None, ALL), "gemini": (None, ALL),
    }),
]


def _choice_of(name: str, body: dict[str, Any]) -> Any:
    return body.get("toolConfig") if name == "gemini" else body.get("tool_choice")


@pytest.mark.parametrize(("mode", "names", "expected"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
@pytest.mark.parametrize("name", MAPPERS)
def test_function_calling_modes_map_to_each_providers_tool_choice(
    name: str, mode: str | None, names: list[str] | None, expected: dict[str, tuple[Any, list[str]]]
) -> None:
    body = _body(name, tools=[FUNCTIONS], tool_config=_calling(mode, names))
    choice, offered = expected[name]
    assert _choice_of(name, body) == choice
    assert _tool_names(name, body) == offered


@pytest.mark.parametrize("name", ["openai-chat", "openai-responses", "anthropic"])
def test_validated_mode_is_refused_naming_the_provider(name: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"\[{PROVIDER_NAME[name]}\].*VALIDATED"):
        _body(name, tools=[FUNCTIONS], tool_config=_calling("VALIDATED"))


def test_gemini_sends_validated_with_its_names() -> None:
    body = _body("gemini", tools=[FUNCTIONS], tool_config=_calling("VALIDATED", ["refund"]))
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "VALIDATED", "allowedFunctionNames": ["refund"]}}
    assert _tool_names("gemini", body) == ALL


@pytest.mark.parametrize("name", MAPPERS)
def test_wrong_function_calling_configs_are_refused_on_every_provider(name: str) -> None:
    provider = PROVIDER_NAME[name]
    with pytest.raises(ConfigurationError, match=rf"\[{provider}\].*does not declare: \['ship'\]"):
        _body(name, tools=[FUNCTIONS], tool_config=_calling("ANY", ["refund", "ship"]))
    with pytest.raises(ConfigurationError, match=rf"\[{provider}\].*mode NONE"):
        _body(name, tools=[FUNCTIONS], tool_config=_calling("NONE", ["refund"]))
    with pytest.raises(ConfigurationError, match=rf"\[{provider}\].*'SOMETIMES' is not known"):
        _body(name, tools=[FUNCTIONS], tool_config=_calling("SOMETIMES"))


@pytest.mark.parametrize("name", ["openai-chat", "openai-responses", "anthropic"])
def test_without_tools_no_tool_choice_is_sent(name: str) -> None:
    body = _body(name, tool_config=_calling("ANY", parallel_tool_calls=False))
    assert "tools" not in body and "tool_choice" not in body and "parallel_tool_calls" not in body


@pytest.mark.parametrize("name", ["openai-chat", "openai-responses"])
def test_openai_sends_parallel_tool_calls_as_set(name: str) -> None:
    serial = _body(name, tools=[FUNCTIONS], tool_config=_calling(parallel_tool_calls=False))
    assert serial["parallel_tool_calls"] is False and "tool_choice" not in serial
    body = _body(name, tools=[FUNCTIONS], tool_config=_calling("ANY", parallel_tool_calls=True))
    assert body["parallel_tool_calls"] is True and body["tool_choice"] == "required"


def test_anthropic_disables_parallel_tool_use_in_its_tool_choice() -> None:
    no_mode = _body("anthropic", tools=[FUNCTIONS], tool_config=_calling(parallel_tool_calls=False))
    assert no_mode["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    forced = _body("anthropic", tools=[FUNCTIONS], tool_config=_calling("ANY", ["refund"], parallel_tool_calls=False))
    assert forced["tool_choice"] == {"type": "tool", "name": "refund", "disable_parallel_tool_use": True}
    assert _body("anthropic", tools=[FUNCTIONS], tool_config=_calling("NONE", parallel_tool_calls=False))[
        "tool_choice"
    ] == {"type": "none"}


def test_gemini_cannot_forbid_parallel_calls() -> None:
    with pytest.raises(ConfigurationError, match=r"\[gemini\] parallel_tool_calls=False"):
        _body("gemini", tools=[FUNCTIONS], tool_config=_calling("AUTO", parallel_tool_calls=False))


@pytest.mark.parametrize(("field", "config"), [
    ("function_calling_config.stream_function_call_arguments",
     {"tool_config": _calling(stream_function_call_arguments=True)}),
    ("google_search.exclude_domains", {"tools": [Tool(google_search=GoogleSearch(exclude_domains=["a.example"]))]}),
    ("google_search.blocking_confidence", {"tools": [Tool(google_search=GoogleSearch(
        blocking_confidence="BLOCK_LOW_AND_ABOVE"))]}),
    ("safety_settings[0].method", {"safety_settings": [SafetySetting(category="HARM_CATEGORY_HARASSMENT",
                                                                     threshold="OFF", method="SEVERITY")]}),
])
def test_gemini_refuses_the_vertex_only_fields_genai_refuses(field: str, config: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match=rf"\[gemini\] {re.escape(field)} is supported on Vertex AI only"):
        _body("gemini", **config)


def test_vertex_only_fields_can_still_go_through_extra_body() -> None:
    extra = {"toolConfig": {"functionCallingConfig": {"streamFunctionCallArguments": True}}}
    body = _body("gemini", tools=[FUNCTIONS], tool_config=_calling("AUTO"), http_options=HttpOptions(extra_body=extra))
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO", "streamFunctionCallArguments": True}}


def test_gemini_only_tool_config_fields() -> None:
    config = ToolConfig(retrieval_config={"latLng": {"latitude": 52.5, "longitude": 13.4}},
                        include_server_side_tool_invocations=True)
    body = _body("gemini", tool_config=config)
    assert body["toolConfig"] == {"retrievalConfig": {"latLng": {"latitude": 52.5, "longitude": 13.4}},
                                  "includeServerSideToolInvocations": True}
    for name in ("openai-chat", "openai-responses", "anthropic"):
        with pytest.raises(ConfigurationError, match=rf"\[{PROVIDER_NAME[name]}\] tool_config.retrieval_config"):
            _body(name, tool_config=config)


# --- built-in tools ---------------------------------------------------------------------------------

BUILT_IN: dict[str, Tool] = {
    "google_search": Tool(google_search=GoogleSearch(time_range_filter={"startTime": "2025-01-01T00:00:00Z"})),
    "code_execution": Tool(code_execution=ToolCodeExecution()),
    "url_context": Tool(url_context=UrlContext()),
    "openai_web_search": Tool(openai_web_search=OpenAiWebSearch(
        search_context_size="low", allowed_domains=["docs.example"], user_location={"type": "approximate",
                                                                                    "country": "DE"})),
    "openai_file_search": Tool(openai_file_search=OpenAiFileSearch(vector_store_ids=["vs_1"], max_num_results=4)),
    "anthropic_server_tool": Tool(anthropic_server_tool=AnthropicServerTool.web_search(
        max_uses=2, blocked_domains=["spam.example"])),
}
# Each provider's own built-in tools, and the wire tool each becomes.
NATIVE: dict[str, dict[str, Any]] = {
    "gemini": {
        "google_search": {"googleSearch": {"timeRangeFilter": {"startTime": "2025-01-01T00:00:00Z"}}},
        "code_execution": {"codeExecution": {}},
        "url_context": {"urlContext": {}},
    },
    "openai-responses": {
        "openai_web_search": {"type": "web_search", "search_context_size": "low",
                              "filters": {"allowed_domains": ["docs.example"]},
                              "user_location": {"type": "approximate", "country": "DE"}},
        "openai_file_search": {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 4},
    },
    "anthropic": {
        "anthropic_server_tool": {"type": "web_search_20250305", "name": "web_search", "max_uses": 2,
                                  "blocked_domains": ["spam.example"]},
    },
    "openai-chat": {},
}
MATRIX = [(name, tool) for name in MAPPERS for tool in BUILT_IN]


@pytest.mark.parametrize(("name", "tool"), MATRIX, ids=[f"{n}-{t}" for n, t in MATRIX])
def test_each_provider_maps_its_own_built_in_tools_and_refuses_the_others(name: str, tool: str) -> None:
    native = NATIVE[name].get(tool)
    if native is None:
        with pytest.raises(ConfigurationError, match=rf"\[{PROVIDER_NAME[name]}\] the built-in tool {tool!r} runs on"):
            _body(name, tools=[BUILT_IN[tool]])
        return
    body = _body(name, tools=[FUNCTIONS, BUILT_IN[tool]])
    assert body["tools"][-1] == native
    assert _tool_names(name, body)[:3] == ALL  # function declarations still go first


def test_gemini_sends_a_tool_with_several_kinds_as_one_wire_tool() -> None:
    tool = Tool(function_declarations=[FunctionDeclaration(name="f")], google_search=GoogleSearch(),
                url_context=UrlContext())
    assert _body("gemini", tools=[tool])["tools"] == [
        {"functionDeclarations": [{"name": "f"}], "googleSearch": {}, "urlContext": {}}
    ]


def test_anthropic_server_tool_settings_are_sent_as_given() -> None:
    tool = AnthropicServerTool(type="web_fetch_20250910", name="web_fetch", max_uses=1,
                               settings={"citations": {"enabled": True}, "max_content_tokens": 5000})
    assert _body("anthropic", tools=[Tool(anthropic_server_tool=tool)])["tools"] == [
        {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 1, "citations": {"enabled": True},
         "max_content_tokens": 5000}
    ]
    assert AnthropicServerTool.code_execution().type == "code_execution_20250825"


# --- safety settings --------------------------------------------------------------------------------


def test_gemini_sends_safety_settings() -> None:
    settings = [SafetySetting(category="HARM_CATEGORY_HARASSMENT", threshold="BLOCK_ONLY_HIGH"),
                SafetySetting(category="HARM_CATEGORY_HATE_SPEECH", threshold="OFF")]
    assert _body("gemini", safety_settings=settings)["safetySettings"] == [
        {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"},
        {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "OFF"},
    ]


@pytest.mark.parametrize("name", ["openai-chat", "openai-responses", "anthropic"])
def test_other_providers_accept_relaxing_safety_settings_and_refuse_blocking_ones(name: str) -> None:
    relaxed = [SafetySetting(category="HARM_CATEGORY_HARASSMENT", threshold="BLOCK_NONE"),
               SafetySetting(category="HARM_CATEGORY_HATE_SPEECH", threshold="OFF")]
    assert _body(name, safety_settings=relaxed) == _body(name)
    with pytest.raises(ConfigurationError, match=rf"\[{PROVIDER_NAME[name]}\] safety_settings: .*BLOCK_LOW_AND_ABOVE "
                                                 "for HARM_CATEGORY_DANGEROUS_CONTENT cannot be enforced"):
        _body(name, safety_settings=[
            *relaxed, SafetySetting(category="HARM_CATEGORY_DANGEROUS_CONTENT", threshold="BLOCK_LOW_AND_ABOVE")
        ])
