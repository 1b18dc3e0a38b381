"""Keys stay secret: out of error messages (also when the provider echoes
them back), reprs and log lines, and never sent in clear text to a remote host unless allowed."""

from __future__ import annotations

import logging
import socket

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder, make_transport

from rxllm import ConfigurationError, HttpStatusError, RetryPolicy, TransportError
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer

KEY = "sk-live-0123456789abcdef"
PORTKEY = "pk-9876543210fedcba"
CUSTOM = "custom-credential-42"


def _echo(status: int, secret: str) -> StubResponse:
    return StubResponse.json(status, {"error": {"message": f"Incorrect API key provided: {secret}."}})


def _all_text(error: BaseException, caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join([str(error), repr(error), *(r.getMessage() for r in caplog.records)])


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_key_echoed_in_an_error_body_never_reaches_the_message_or_the_logs(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rxllm")
    transport = make_transport(kind)
    try:
        with StubServer([_echo(503, KEY), _echo(401, f"{KEY} / {PORTKEY} / {CUSTOM}")]) as server:
            model = OpenAiChatModel(
                "gpt-test",
                base_url=f"{server.url}/v1",
                api_key=KEY,
                extra_headers={"X-Portkey-Api-Key": PORTKEY, "X-Custom": CUSTOM},
                secret_names=("x-custom",),
                transport=transport,
                retry_policy=RetryPolicy(base_delay=0.01),
            )
            recorder = Recorder()
            recorder.subscribe(model.generate_content(REQUEST, stream=True))
            recorder.wait("a 503 then a 401 that echo the key")
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, HttpStatusError) and error.status_code == 401
    assert error.provider_message == "Incorrect API key provided: *** / *** / ***."
    text = _all_text(error, caplog)
    assert "retrying" in text  # the 503 was logged, redacted
    for secret in (KEY, PORTKEY, CUSTOM):
        assert secret not in text


def test_a_key_in_the_url_query_is_redacted_from_transport_errors_and_reprs() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = GeminiModel("gemini-test", base_url=f"http://127.0.0.1:{port}/v1beta?key={KEY}", api_key=None,
                        retry_policy=RetryPolicy.never())
    assert KEY not in repr(model) and KEY not in repr(model._mapper)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait("a refused connection", timeout=TIMEOUT)
    (error,) = recorder.errors
    assert isinstance(error, TransportError)
    assert KEY not in str(error) and "key=***" in str(error)


def test_custom_credential_headers_are_redacted_in_reprs() -> None:
    model = OpenAiChatModel("m", base_url="https://gateway.example/v1", api_key=KEY,
                            extra_headers={"X-Portkey-Api-Key": PORTKEY, "x-session-token": "tok-123456"})
    shown = repr(model._mapper) + repr(model._mapper.to_http_request(REQUEST, model="m", stream=True))
    assert KEY not in shown and PORTKEY not in shown and "tok-123456" not in shown


@pytest.mark.parametrize(
    "base_url",
    ["http://10.1.2.3:8080/v1", "http://api.example.com/v1", "http://[2001:db8::1]/v1"],
)
def test_a_key_is_not_sent_in_clear_text_to_a_remote_host(base_url: str) -> None:
    with pytest.raises(ConfigurationError, match="allow_insecure_key=True"):
        OpenAiChatModel("m", base_url=base_url, api_key=KEY)
    with pytest.raises(ConfigurationError, match="plain HTTP"):
        AnthropicModel("m", base_url=base_url, api_key=KEY)
    with pytest.raises(ConfigurationError):  # a credential in a custom header counts too
        OpenAiChatModel("m", base_url=base_url, api_key=None, extra_headers={"X-Portkey-Api-Key": PORTKEY})
    OpenAiChatModel("m", base_url=base_url, api_key=KEY, allow_insecure_key=True)
    OpenAiChatModel("m", base_url=base_url, api_key=None)  # no key: nothing to protect


@pytest.mark.parametrize(
    "base_url", ["https://api.example.com/v1", "http://127.0.0.1:8080/v1", "http://localhost/v1", "http://[::1]/v1"]
)
def test_tls_and_loopback_destinations_take_a_key(base_url: str) -> None:
    OpenAiChatModel("m", base_url=base_url, api_key=KEY)
