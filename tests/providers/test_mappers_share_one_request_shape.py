"""What every request mapper does the same way (rxllm/providers/_wire.py): headers, repr, body encoding,
config options, ids for calls without one."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from rxllm import ConfigurationError, GenerateContentConfig, LlmRequest, Part, RequestMapper
from rxllm.providers._anthropic import AnthropicRequestMapper
from rxllm.providers._gemini import GeminiRequestMapper
from rxllm.providers._openai_chat import OpenAiChatRequestMapper
from rxllm.providers._openai_responses import OpenAiResponsesRequestMapper

from .contents import model, user

KEY = "sk-shared-SECRET-key"
MAPPERS: dict[str, Callable[..., RequestMapper]] = {
    "openai-chat": lambda **kw: OpenAiChatRequestMapper(base_url="https://x.example/v1", **kw),
    "openai-responses": lambda **kw: OpenAiResponsesRequestMapper(**kw),
    "anthropic": lambda **kw: AnthropicRequestMapper(**kw),
    "gemini": lambda **kw: GeminiRequestMapper(**kw),
}
HELLO = LlmRequest(contents=[user(Part.from_text("hi"))])


@pytest.mark.parametrize("make", MAPPERS.values(), ids=list(MAPPERS))
def test_extra_headers_replace_defaults_in_any_letter_case(make: Callable[..., RequestMapper]) -> None:
    mapper = make(api_key=KEY, extra_headers={"Accept": "*/*", "X-Trace": "t1"})
    headers = mapper.to_http_request(HELLO, model="m", stream=True).headers
    assert [name for name in headers if name.lower() == "accept"] == ["Accept"]
    assert headers["Accept"] == "*/*" and headers["X-Trace"] == "t1"
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize("make", MAPPERS.values(), ids=list(MAPPERS))
def test_repr_shows_neither_the_key_nor_a_credential_header(make: Callable[..., RequestMapper]) -> None:
    mapper = make(api_key=KEY, extra_headers={"x-api-key": KEY, "X-Trace": "t1"})
    shown = repr(mapper)
    assert KEY not in shown and KEY not in repr(mapper.to_http_request(HELLO, model="m", stream=False))
    assert "api_key='***'" in shown and "'X-Trace': 't1'" in shown
    assert "api_key=None" in repr(make(api_key=None))


@pytest.mark.parametrize("make", MAPPERS.values(), ids=list(MAPPERS))
def test_a_body_json_cannot_carry_is_a_configuration_error(make: Callable[..., RequestMapper]) -> None:
    request = LlmRequest(contents=HELLO.contents, config=GenerateContentConfig(temperature=math.nan))
    with pytest.raises(ConfigurationError) as info:
        make(api_key=KEY).to_http_request(request, model="m", stream=True)
    assert KEY not in str(info.value)


@pytest.mark.parametrize("make", MAPPERS.values(), ids=list(MAPPERS))
def test_unset_and_empty_options_are_left_out(make: Callable[..., RequestMapper]) -> None:
    request = LlmRequest(contents=HELLO.contents, config=GenerateContentConfig(stop_sequences=()))
    body: dict[str, Any] = json.loads(make(api_key=KEY).to_http_request(request, model="m", stream=False).body)
    assert not {"stop", "stop_sequences", "temperature", "top_p", "generationConfig"} & body.keys()


@pytest.mark.parametrize(
    ("make", "made_ids"),
    [
        (MAPPERS["openai-chat"], ("call00001", "call00002")),
        (MAPPERS["openai-responses"], ("call_rxllm_1", "call_rxllm_2")),
        (MAPPERS["anthropic"], ("toolu_rxllm_1", "toolu_rxllm_2")),
    ],
    ids=["openai-chat", "openai-responses", "anthropic"],
)
def test_calls_without_ids_get_made_up_ids_their_responses_take_in_order(
    make: Callable[..., RequestMapper], made_ids: tuple[str, str]
) -> None:
    request = LlmRequest(
        contents=[
            model(Part.from_function_call("f", {"a": 1}), Part.from_function_call("f", {"a": 2})),
            user(Part.from_function_response("f", {"r": 1}), Part.from_function_response("f", {"r": 2})),
        ]
    )
    text = make(api_key=KEY).to_http_request(request, model="m", stream=False).body.decode()
    first, second = (json.dumps(made) for made in made_ids)
    assert text.count(first) == 2 and text.count(second) == 2  # each call's id, then its response's
    assert text.index(first) < text.index(second) < text.rindex(first) < text.rindex(second)
    orphan = LlmRequest(contents=[user(Part.from_function_response("g", {}))])
    with pytest.raises(ConfigurationError, match="'g'"):
        make(api_key=KEY).to_http_request(orphan, model="m", stream=False)
