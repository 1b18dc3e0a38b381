"""``extra_body`` and extra headers, per model and per request (``config.http_options``), on every provider.

The rule: the model's ``extra_body`` and then the request's are merged into rxllm's body; objects
merge member by member; where rxllm sets a non-object value, rxllm's is kept (with a warning) unless
``extra_body_overrides`` says otherwise. Headers: the request's replace the model's, which replace
rxllm's, in any letter case. Credential-named members and headers never show in a repr.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import (
    ConfigurationError,
    GenerateContentConfig,
    HttpOptions,
    LlmRequest,
    Part,
    RequestMapper,
    SseChatModel,
)
from rxllm.providers.anthropic import AnthropicModel, AnthropicRequestMapper
from rxllm.providers.gemini import GeminiModel, GeminiRequestMapper
from rxllm.providers.openai import (
    AzureOpenAiChatModel,
    OpenAiChatModel,
    OpenAiChatRequestMapper,
    OpenAiResponsesModel,
    OpenAiResponsesRequestMapper,
)
from rxllm.testing import StubResponse, StubServer, sse_turn

from .contents import user

KEY = "sk-extras-SECRET-key"
MAPPERS: dict[str, Callable[..., RequestMapper]] = {
    "openai-chat": lambda **kw: OpenAiChatRequestMapper(base_url="https://x.example/v1", api_key=KEY, **kw),
    "openai-responses": lambda **kw: OpenAiResponsesRequestMapper(api_key=KEY, **kw),
    "anthropic": lambda **kw: AnthropicRequestMapper(api_key=KEY, **kw),
    "gemini": lambda **kw: GeminiRequestMapper(api_key=KEY, **kw),
}
# A member each API's body already carries as a plain value, and one it carries as an object.
OWN_SCALAR = {"openai-chat": "model", "openai-responses": "model", "anthropic": "model", "gemini": "contents"}
TEMPERATURE = {"openai-chat": ("temperature",), "openai-responses": ("temperature",),
               "anthropic": ("temperature",), "gemini": ("generationConfig", "temperature")}


def _request(http_options: HttpOptions | None = None, **config: Any) -> LlmRequest:
    return LlmRequest(contents=[user(Part.from_text("hi"))],
                      config=GenerateContentConfig(http_options=http_options, **config))


def _send(mapper: RequestMapper, request: LlmRequest) -> tuple[dict[str, Any], dict[str, str]]:
    http = mapper.to_http_request(request, model="m", stream=True)
    return json.loads(http.body), dict(http.headers)


def _at(body: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        body = body[key]
    return body


@pytest.mark.parametrize("name", MAPPERS)
def test_model_and_request_extra_bodies_are_added_and_objects_merge(name: str) -> None:
    mapper = MAPPERS[name](extra_body={"ignore_eos": True, "provider": {"order": ["a"], "sort": "price"}})
    plain, _ = _send(mapper, _request())
    assert plain["ignore_eos"] is True and plain["provider"] == {"order": ["a"], "sort": "price"}

    options = HttpOptions(extra_body={"provider": {"order": ["b", "c"]}, "guided_json": {"type": "object"}})
    body, _ = _send(mapper, _request(options, temperature=0.5))
    # the request's extra body merges over the model's: objects member by member, other values replaced
    assert body["provider"] == {"order": ["b", "c"], "sort": "price"}
    assert body["guided_json"] == {"type": "object"} and body["ignore_eos"] is True
    assert _at(body, TEMPERATURE[name]) == 0.5
    # and into rxllm's own objects, member by member
    nested: dict[str, Any] = {}
    cursor = nested
    for key in TEMPERATURE[name][:-1]:
        cursor = cursor.setdefault(key, {})
    cursor["x_extra"] = 1
    merged, _ = _send(MAPPERS[name](extra_body=nested), _request(temperature=0.5))
    assert _at(merged, (*TEMPERATURE[name][:-1], "x_extra")) == 1
    assert _at(merged, TEMPERATURE[name]) == 0.5


@pytest.mark.parametrize("name", MAPPERS)
def test_rxllms_own_values_win_and_the_clash_is_logged_unless_overrides(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    own = OWN_SCALAR[name]
    path = TEMPERATURE[name]
    clash: dict[str, Any] = {own: "theirs"}
    cursor = clash
    for key in path[:-1]:
        cursor = cursor.setdefault(key, {})
    cursor[path[-1]] = 0.9
    mapper = MAPPERS[name](extra_body=clash)
    reference, _ = _send(MAPPERS[name](), _request(temperature=0.1))
    with caplog.at_level(logging.WARNING, logger="rxllm.providers"):
        body, _ = _send(mapper, _request(temperature=0.1))
    assert body == reference
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert f"'{own}'" in logged and "'" + ".".join(path) + "'" in logged and "0.9" not in logged

    overriding, _ = _send(MAPPERS[name](extra_body=clash, extra_body_overrides=True), _request(temperature=0.1))
    assert overriding[own] == "theirs" and _at(overriding, path) == 0.9
    # the request says otherwise for itself, either way
    per_request, _ = _send(mapper, _request(HttpOptions(extra_body_overrides=True), temperature=0.1))
    assert per_request[own] == "theirs"
    kept, _ = _send(MAPPERS[name](extra_body=clash, extra_body_overrides=True),
                    _request(HttpOptions(extra_body_overrides=False), temperature=0.1))
    assert kept == reference


def test_an_equal_value_is_no_clash(caplog: pytest.LogCaptureFixture) -> None:
    mapper = OpenAiChatRequestMapper(base_url="https://x.example/v1", api_key=None, extra_body={"stream": True})
    with caplog.at_level(logging.WARNING, logger="rxllm.providers"):
        body, _ = _send(mapper, _request())
    assert body["stream"] is True and not caplog.records


def test_merging_never_changes_the_config_or_a_later_request() -> None:
    extra = {"provider": {"order": ["a"]}}
    options = HttpOptions(extra_body={"provider": {"only": ["b"]}})
    mapper = OpenAiChatRequestMapper(base_url="https://x.example/v1", api_key=None, extra_body=extra)
    first, _ = _send(mapper, _request(options))
    second, _ = _send(mapper, _request())
    assert first["provider"] == {"order": ["a"], "only": ["b"]}
    assert second["provider"] == {"order": ["a"]}
    assert extra == {"provider": {"order": ["a"]}} and options.extra_body == {"provider": {"only": ["b"]}}


@pytest.mark.parametrize("name", MAPPERS)
def test_request_headers_replace_the_models_and_the_defaults(name: str) -> None:
    mapper = MAPPERS[name](extra_headers={"X-Trace": "model", "X-Team": "a"})
    options = HttpOptions(headers={"x-trace": "request", "ACCEPT": "application/x-ndjson", "X-Req": "1"})
    _, headers = _send(mapper, _request(options))
    lowered = {k.lower(): v for k, v in headers.items()}
    assert [k for k in headers if k.lower() == "x-trace"] == ["x-trace"]
    assert lowered["x-trace"] == "request" and lowered["accept"] == "application/x-ndjson"
    assert lowered["x-team"] == "a" and lowered["x-req"] == "1"
    _, plain = _send(mapper, _request())
    assert plain["X-Trace"] == "model"


@pytest.mark.parametrize("name", MAPPERS)
def test_credential_members_and_headers_never_show_in_a_repr(name: str) -> None:
    secret_body = {"gateway": {"api_key": "gw-SECRET-value"}, "route": "fast"}
    mapper = MAPPERS[name](extra_body=secret_body, extra_headers={"X-Portkey-Api-Key": "pk-SECRET"})
    shown = repr(mapper)
    assert "SECRET" not in shown and "'route': 'fast'" in shown and "'api_key': '***'" in shown
    options = HttpOptions(headers={"Authorization": "Bearer tok-SECRET"}, extra_body={"token": "t-SECRET"})
    request = _request(options)
    for text in (repr(options), repr(request.config), repr(request), str(request.config)):
        assert "SECRET" not in text
    http = mapper.to_http_request(request, model="m", stream=True)
    assert "SECRET" not in repr(http)
    assert b"gw-SECRET-value" in http.body and b"t-SECRET" in http.body  # sent, only never shown


def test_extra_body_must_be_a_mapping_and_json() -> None:
    with pytest.raises(ConfigurationError, match=r"\[openai\] extra_body must be a mapping"):
        OpenAiChatRequestMapper(base_url="https://x.example/v1", api_key=None, extra_body=["a"])  # type: ignore[arg-type]
    mapper = GeminiRequestMapper(api_key=None, extra_body={"bad": float("nan")})
    with pytest.raises(ConfigurationError, match=r"\[gemini\] the request cannot be encoded as JSON"):
        mapper.to_http_request(_request(), model="m", stream=True)


def test_http_options_accept_only_headers_and_extra_body() -> None:
    with pytest.raises(ValueError, match="timeout"):
        HttpOptions.model_validate({"headers": {}, "timeout": 5})
    assert HttpOptions.model_validate({"extraBody": {"a": 1}}).extra_body == {"a": 1}


# --- through the real models, as the stub server received them -------------------------------------

_CHAT_REPLY = StubResponse.sse(sse_turn("openai-chat", text=["ok"]))
MODELS: dict[str, tuple[Callable[..., SseChatModel], StubResponse]] = {
    "openai-chat": (lambda url, **kw: OpenAiChatModel("m", base_url=f"{url}/v1", api_key=KEY, **kw), _CHAT_REPLY),
    "azure-openai": (
        lambda url, **kw: AzureOpenAiChatModel("d", endpoint=url, api_version="2024-10-21", api_key=KEY, **kw),
        _CHAT_REPLY,
    ),
    "openai-responses": (
        lambda url, **kw: OpenAiResponsesModel("m", base_url=f"{url}/v1", api_key=KEY, **kw),
        StubResponse.sse([
            '{"type":"response.output_text.delta","delta":"ok"}',
            '{"type":"response.completed","response":{"status":"completed"}}',
        ]),
    ),
    "anthropic": (
        lambda url, **kw: AnthropicModel("m", base_url=url, api_key=KEY, **kw),
        StubResponse.sse(sse_turn("anthropic", text=["ok"])),
    ),
    "gemini": (
        lambda url, **kw: GeminiModel("m", base_url=url, api_key=KEY, **kw),
        StubResponse.sse(sse_turn("gemini", text=["ok"])),
    ),
}


@pytest.mark.parametrize("name", MODELS)
def test_every_model_sends_its_constructor_and_request_extras(name: str) -> None:
    make, reply = MODELS[name]
    with StubServer([reply]) as server:
        model = make(server.url, extra_body={"ignore_eos": True, "priority": 1}, extra_headers={"X-Team": "a"})
        request = _request(HttpOptions(headers={"X-Request": "r1"}, extra_body={"priority": 5, "top_n": 2}))
        responses = model.generate_content(request, stream=True).pipe(ops.to_list()).run()
        assert responses[-1].text() == "ok"
        (received,) = server.requests
    body = received.json()
    assert body["ignore_eos"] is True and body["priority"] == 5 and body["top_n"] == 2
    assert received.headers["x-team"] == "a" and received.headers["x-request"] == "r1"
    assert "SECRET" not in repr(model)
