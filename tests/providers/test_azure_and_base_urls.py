"""Base URLs with a query string, Azure OpenAI, and the ``User-Agent`` header, as the stub server received them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import rxllm
from rxllm import (
    AsyncHttpTransport,
    ConfigurationError,
    Content,
    HttpStatusError,
    HttpTransport,
    LlmRequest,
    Part,
    SseChatModel,
)
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import AzureOpenAiChatModel, OpenAiChatModel, OpenAiResponsesModel
from rxllm.testing import StubResponse, StubServer, sse_turn

REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("hi")])])
KEY = "azure-secret-key-1234"
TOKEN = "entra-token-5678"


Maker = Callable[[str, HttpTransport | AsyncHttpTransport], SseChatModel]

# provider, model on a base URL with "?tenant=t1", the path the request must go to
PROVIDERS: list[tuple[str, Maker, str]] = [
    ("openai-chat",
     lambda url, t: OpenAiChatModel("m", base_url=f"{url}/v1?tenant=t1", api_key="k", transport=t),
     "/v1/chat/completions?tenant=t1"),
    ("openai-responses",
     lambda url, t: OpenAiResponsesModel("m", base_url=f"{url}/v1/?tenant=t1", api_key="k", transport=t),
     "/v1/responses?tenant=t1"),
    ("anthropic",
     lambda url, t: AnthropicModel("m", base_url=f"{url}?tenant=t1", api_key="k", transport=t),
     "/v1/messages?tenant=t1"),
    ("gemini",
     lambda url, t: GeminiModel("m", base_url=f"{url}/?tenant=t1", api_key="k", transport=t),
     "/v1beta/models/m:streamGenerateContent?alt=sse&tenant=t1"),
]


@pytest.mark.parametrize(("name", "make", "path"), PROVIDERS, ids=[p[0] for p in PROVIDERS])
def test_a_base_url_query_follows_the_path_and_a_user_agent_is_sent(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, name: str, make: Maker, path: str
) -> None:
    stub_server.enqueue(StubResponse.json(400, {"error": {"message": "only the request matters here"}}))
    with pytest.raises(HttpStatusError):
        make(stub_server.url, transport).generate_content(REQUEST, stream=True).run()
    (request,) = stub_server.requests
    assert request.path == path
    assert request.headers["user-agent"] == f"rxllm/{rxllm.__version__}"


def test_a_user_agent_of_the_users_own_wins(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["ok"])))
    model = OpenAiChatModel("m", base_url=stub_server.url, api_key="k", extra_headers={"User-Agent": "my-app/2.0"},
                            transport=transport)
    model.generate_content(REQUEST, stream=True).run()
    assert stub_server.requests[0].headers["user-agent"] == "my-app/2.0"


def _azure(server: StubServer, transport: HttpTransport | AsyncHttpTransport, **credentials: str) -> SseChatModel:
    return AzureOpenAiChatModel(
        "my deployment", endpoint=f"{server.url}/", api_version="2024-10-21", transport=transport, **credentials
    )


def test_azure_sends_the_key_as_api_key_to_the_deployment_url(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["Hello", " Azure"])))
    model = _azure(stub_server, transport, api_key=KEY)
    assert model.generate_content(REQUEST, stream=True).run().text() == "Hello Azure"
    (request,) = stub_server.requests
    assert request.path == "/openai/deployments/my%20deployment/chat/completions?api-version=2024-10-21"
    assert request.headers["api-key"] == KEY
    assert "authorization" not in request.headers
    assert request.headers["user-agent"] == f"rxllm/{rxllm.__version__}"
    assert request.json()["stream"] is True
    assert KEY not in repr(model) and KEY not in repr(model._mapper)


def test_azure_sends_an_entra_token_as_bearer(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["ok"])))
    model = _azure(stub_server, transport, azure_ad_token=TOKEN)
    model.generate_content(REQUEST, stream=True).run()
    (request,) = stub_server.requests
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "api-key" not in request.headers
    assert TOKEN not in repr(model._mapper)


def test_azure_refuses_a_key_and_a_token_together() -> None:
    with pytest.raises(ConfigurationError, match="not both") as raised:
        AzureOpenAiChatModel("d", endpoint="https://r.openai.azure.com", api_version="v", api_key=KEY,
                             azure_ad_token=TOKEN)
    assert KEY not in str(raised.value) and TOKEN not in str(raised.value)


def test_azure_reads_the_environment_key_for_the_configured_endpoint(
    stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", stub_server.url)
    stub_server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["ok"])))
    transport = HttpTransport(max_concurrent_streams=2)
    try:
        model = AzureOpenAiChatModel("d", endpoint=stub_server.url, api_version="2024-10-21", transport=transport)
        model.generate_content(REQUEST, stream=True).run()
    finally:
        transport.close()
    assert stub_server.requests[0].headers["api-key"] == KEY


def test_azure_never_sends_the_environment_key_to_another_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(ConfigurationError, match="no credential") as raised:
        AzureOpenAiChatModel("d", endpoint="http://127.0.0.1:9", api_version="2024-10-21")
    assert KEY not in str(raised.value)
    # an Azure OpenAI resource gets it
    model = AzureOpenAiChatModel("d", endpoint="https://r.openai.azure.com", api_version="2024-10-21")
    request = model._mapper.to_http_request(REQUEST, model="d", stream=False)
    assert request.headers["api-key"] == KEY
    assert request.url == "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"


@pytest.mark.parametrize("missing", ["deployment", "endpoint", "api_version"])
def test_azure_needs_deployment_endpoint_and_version(missing: str) -> None:
    arguments = {"deployment": "d", "endpoint": "https://r.openai.azure.com", "api_version": "v"}
    arguments[missing] = " "
    deployment = arguments.pop("deployment")
    with pytest.raises(ConfigurationError, match=missing):
        AzureOpenAiChatModel(deployment, api_key=KEY, **arguments)
