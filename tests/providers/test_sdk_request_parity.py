"""rxllm's request bodies against the official SDKs': the same request, built with ``openai`` and
``google-genai`` against a loopback stub server, must put the same JSON on the wire.

Covers what this suite's mappers add on top of plain chat: ``tool_choice`` and
``parallel_tool_calls`` (OpenAI Chat Completions and Responses), the Responses API's built-in
``web_search`` and ``file_search``, Gemini's ``toolConfig``, ``safetySettings`` and built-in tools,
and ``extra_body`` / per-request headers. genai's config is also validated into rxllm's types
from genai's own JSON, so the shapes are proven the same.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rxllm import (
    ConfigurationError,
    FunctionCallingConfig,
    FunctionDeclaration,
    GenerateContentConfig,
    HttpOptions,
    LlmRequest,
    OpenAiFileSearch,
    OpenAiWebSearch,
    Part,
    Tool,
    ToolConfig,
)
from rxllm.providers._gemini import GeminiRequestMapper
from rxllm.providers._openai_chat import OpenAiChatRequestMapper
from rxllm.providers._openai_responses import OpenAiResponsesRequestMapper
from rxllm.testing import RecordedRequest, StubResponse, StubServer

from .contents import user

openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")
from google.genai import types as genai_types  # noqa: E402

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
CHAT_REPLY = {
    "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
}
RESPONSES_REPLY = {
    "id": "r1", "object": "response", "created_at": 0, "model": "m", "status": "completed", "output": [],
    "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
}
GEMINI_REPLY = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}
HELLO = [user(Part.from_text("Where is order A17?"))]


def _recorded(reply: dict[str, Any], call: Any) -> RecordedRequest:
    with StubServer([StubResponse.json(200, reply)]) as server:
        call(server.url)
        (request,) = server.requests
    return request


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _proto_json(value: Any) -> Any:
    """``value`` as the Gemini API reads it: protobuf JSON takes a field by its proto name
    (``parameters_json_schema``, which genai sends for nested objects) or its camelCase name, and
    the order of ``tools`` does not matter (genai moves function tools last)."""
    if isinstance(value, dict):
        normal = {_camel(k): _proto_json(v) for k, v in value.items()}
        if isinstance(normal.get("tools"), list):
            normal["tools"] = sorted(normal["tools"], key=lambda tool: json.dumps(tool, sort_keys=True))
        return normal
    if isinstance(value, list):
        return [_proto_json(v) for v in value]
    return value


def _functions(*names: str) -> Tool:
    return Tool(function_declarations=[
        FunctionDeclaration(name=name, description=f"{name} an order.", parameters=SCHEMA) for name in names
    ])


def _openai_functions(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "description": f"{n} an order.", "parameters": SCHEMA}}
            for n in names]


CHAT_CASES: list[tuple[str, FunctionCallingConfig, dict[str, Any]]] = [
    ("named", FunctionCallingConfig(mode="ANY", allowed_function_names=["cancel"], parallel_tool_calls=False),
     {"tool_choice": {"type": "function", "function": {"name": "cancel"}}, "parallel_tool_calls": False,
      "tools": _openai_functions("lookup", "cancel", "refund")}),
    ("required-restricted", FunctionCallingConfig(mode="ANY", allowed_function_names=["lookup", "cancel"]),
     {"tool_choice": "required", "tools": _openai_functions("lookup", "cancel")}),
    ("none", FunctionCallingConfig(mode="NONE"), {"tool_choice": "none", "tools": _openai_functions("lookup", "cancel",
                                                                                                      "refund")}),
    ("auto-restricted", FunctionCallingConfig(mode="AUTO", allowed_function_names=["refund"]),
     {"tool_choice": "auto", "tools": _openai_functions("refund")}),
]


@pytest.mark.parametrize(("case", "calling", "sdk_args"), CHAT_CASES, ids=[c[0] for c in CHAT_CASES])
def test_chat_completions_body_equals_the_openai_sdks(case: str, calling: FunctionCallingConfig,
                                                      sdk_args: dict[str, Any]) -> None:
    config = GenerateContentConfig(
        tools=[_functions("lookup", "cancel", "refund")],
        tool_config=ToolConfig(function_calling_config=calling),
        http_options=HttpOptions(headers={"X-Trace": "t1"}, extra_body={"ignore_eos": True, "top_k": 20}),
    )
    mapper = OpenAiChatRequestMapper(base_url="http://127.0.0.1:1/v1", api_key="sk-test")
    ours = mapper.to_http_request(LlmRequest(contents=HELLO, config=config), model="m", stream=False)

    def call(url: str) -> None:
        client = openai.OpenAI(api_key="sk-test", base_url=f"{url}/v1", max_retries=0)
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Where is order A17?"}], **sdk_args,
            extra_body={"ignore_eos": True, "top_k": 20}, extra_headers={"X-Trace": "t1"},
        )

    theirs = _recorded(CHAT_REPLY, call)
    assert json.loads(ours.body) == theirs.json()
    assert ours.headers["X-Trace"] == theirs.headers["x-trace"] == "t1"


def test_responses_body_equals_the_openai_sdks() -> None:
    web = OpenAiWebSearch(search_context_size="high", allowed_domains=["docs.example"],
                          user_location={"type": "approximate", "country": "DE", "city": "Berlin"})
    files = OpenAiFileSearch(vector_store_ids=["vs_1", "vs_2"], max_num_results=3,
                             ranking_options={"ranker": "auto", "score_threshold": 0.5})
    config = GenerateContentConfig(
        tools=[_functions("lookup"), Tool(openai_web_search=web), Tool(openai_file_search=files)],
        tool_config=ToolConfig(function_calling_config=FunctionCallingConfig(
            mode="ANY", allowed_function_names=["lookup"], parallel_tool_calls=False)),
        http_options=HttpOptions(extra_body={"service_tier": "flex"}),
    )
    mapper = OpenAiResponsesRequestMapper(base_url="http://127.0.0.1:1/v1", api_key="sk-test")
    ours = json.loads(mapper.to_http_request(LlmRequest(contents=HELLO, config=config), model="m", stream=False).body)

    def call(url: str) -> None:
        client = openai.OpenAI(api_key="sk-test", base_url=f"{url}/v1", max_retries=0)
        client.responses.create(
            model="m",
            input=ours["input"],  # the conversation items are not what this test is about
            tools=[
                {"type": "function", "name": "lookup", "description": "lookup an order.", "parameters": SCHEMA,
                 "strict": False},
                {"type": "web_search", "search_context_size": "high", "filters": {"allowed_domains": ["docs.example"]},
                 "user_location": {"type": "approximate", "country": "DE", "city": "Berlin"}},
                {"type": "file_search", "vector_store_ids": ["vs_1", "vs_2"], "max_num_results": 3,
                 "ranking_options": {"ranker": "auto", "score_threshold": 0.5}},
            ],
            tool_choice={"type": "function", "name": "lookup"},
            parallel_tool_calls=False,
            extra_body={"service_tier": "flex"},
        )

    assert ours == _recorded(RESPONSES_REPLY, call).json()


def test_gemini_body_equals_the_genai_sdks_and_genais_config_validates_as_rxllms() -> None:
    their_config = genai_types.GenerateContentConfig(
        tools=[
            genai_types.Tool(function_declarations=[genai_types.FunctionDeclaration(
                name="lookup", description="lookup an order.", parameters_json_schema=SCHEMA)]),
            genai_types.Tool(google_search=genai_types.GoogleSearch(
                search_types=genai_types.SearchTypes(web_search=genai_types.WebSearch()))),
            genai_types.Tool(code_execution=genai_types.ToolCodeExecution(), url_context=genai_types.UrlContext()),
        ],
        tool_config=genai_types.ToolConfig(
            function_calling_config=genai_types.FunctionCallingConfig(
                mode=genai_types.FunctionCallingConfigMode.ANY, allowed_function_names=["lookup"]),
            retrieval_config=genai_types.RetrievalConfig(language_code="de"),
        ),
        safety_settings=[
            genai_types.SafetySetting(category=genai_types.HarmCategory.HARM_CATEGORY_HARASSMENT,
                                      threshold=genai_types.HarmBlockThreshold.BLOCK_ONLY_HIGH),
            genai_types.SafetySetting(category=genai_types.HarmCategory.HARM_CATEGORY_HATE_SPEECH,
                                      threshold=genai_types.HarmBlockThreshold.OFF),
        ],
        http_options=genai_types.HttpOptions(extra_body={"labels": {"team": "support"}}, headers={"X-Trace": "t1"}),
        temperature=0.3,
    )
    # genai's own JSON of everything but the function declarations (rxllm's take a JSON schema as
    # ``parameters``; genai's ``parameters`` is its OpenAPI Schema type) validates as rxllm's config.
    dumped = json.loads(their_config.model_dump_json(by_alias=True, exclude_none=True, exclude={"tools": {0}}))
    dumped["tools"] = [{}, *dumped["tools"]]
    config = GenerateContentConfig.model_validate(dumped)
    config = config.model_copy(update={"tools": (_functions("lookup"), *config.tools[1:])})
    mapper = GeminiRequestMapper(base_url="http://127.0.0.1:1", api_key="k")
    ours = mapper.to_http_request(LlmRequest(contents=HELLO, config=config), model="m", stream=False)

    def call(url: str) -> None:
        client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=url, api_version="v1beta"))
        client.models.generate_content(model="m", contents="Where is order A17?", config=their_config)

    theirs = _recorded(GEMINI_REPLY, call)
    body = json.loads(ours.body)
    assert _proto_json(body) == _proto_json(theirs.json())
    assert body["labels"] == {"team": "support"} and body["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"
    assert len(body["safetySettings"]) == 2 and {"codeExecution": {}, "urlContext": {}} in body["tools"]
    assert ours.headers["X-Trace"] == theirs.headers["x-trace"] == "t1"
    assert theirs.path.endswith("/v1beta/models/m:generateContent")


def test_gemini_refuses_a_safety_method_as_genai_does_for_the_gemini_api() -> None:
    setting = genai_types.SafetySetting(category=genai_types.HarmCategory.HARM_CATEGORY_HARASSMENT,
                                        threshold=genai_types.HarmBlockThreshold.OFF,
                                        method=genai_types.HarmBlockMethod.SEVERITY)
    client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url="http://127.0.0.1:1"))
    with pytest.raises(ValueError, match="method parameter is only supported"):
        client.models.generate_content(model="m", contents="hi",
                                       config=genai_types.GenerateContentConfig(safety_settings=[setting]))
    config = GenerateContentConfig.model_validate({"safetySettings": [setting.model_dump(mode="json")]})
    with pytest.raises(ConfigurationError, match=r"\[gemini\] safety_settings\[0\].method"):
        GeminiRequestMapper(api_key="k").to_http_request(LlmRequest(contents=HELLO, config=config), model="m",
                                                         stream=False)
