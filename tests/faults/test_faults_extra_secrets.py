"""A credential sent in an extra header or an extra body member (the model's or one request's) is
redacted like the API key: in the error a server echoing it causes, in the error's repr, in log
lines; a live (WebSocket) model's extra header too. Real loopback servers.
"""

from __future__ import annotations

import json
import logging

import pytest
from faults_support import TRANSPORT_KINDS, Recorder, make_transport

from rxllm import Content, GenerateContentConfig, HttpOptions, HttpStatusError, LlmRequest, Part, RetryPolicy
from rxllm._core.redact import redact_secrets
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer

MODEL_HEADER = "gw-model-header-0123456789"
MODEL_BODY = "gw-model-body-0123456789"
REQUEST_HEADER = "gw-request-header-0123456789"
REQUEST_BODY = "gw-request-body-0123456789"
SECRETS = (MODEL_HEADER, MODEL_BODY, REQUEST_HEADER, REQUEST_BODY)


def _echo() -> StubResponse:
    message = "rejected: " + ", ".join(SECRETS)
    return StubResponse(status=401, headers={"content-type": "application/json"},
                        body=[json.dumps({"error": {"message": message, "type": "auth"}}).encode()], chunked=False)


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_extra_header_and_body_credentials_are_redacted_like_the_key(kind: str,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    request = LlmRequest(
        contents=(Content(role="user", parts=(Part.from_text("hi"),)),),
        config=GenerateContentConfig(http_options=HttpOptions(headers={"X-Request-Token": REQUEST_HEADER},
                                                              extra_body={"auth": {"secret": REQUEST_BODY}})),
    )
    with StubServer([_echo()]) as server:
        transport = make_transport(kind)
        try:
            model = OpenAiChatModel("m", base_url=f"{server.url}/v1", api_key="sk-key-0123456789",
                                    transport=transport, retry_policy=RetryPolicy.never(),
                                    extra_headers={"X-Gateway-Token": MODEL_HEADER},
                                    extra_body={"gateway": {"api_key": MODEL_BODY}})
            recorder = Recorder()
            recorder.subscribe(model.generate_content(request, stream=True))
            recorder.wait("a call")
        finally:
            transport.close()
        sent = server.requests[0]
    # they were sent as given
    assert sent.headers["x-gateway-token"] == MODEL_HEADER and sent.headers["x-request-token"] == REQUEST_HEADER
    assert MODEL_BODY.encode() in sent.body and REQUEST_BODY.encode() in sent.body
    (error,) = recorder.errors
    assert isinstance(error, HttpStatusError) and "rejected" in str(error)
    with caplog.at_level(logging.INFO, logger="rxllm"):
        logging.getLogger("rxllm.test").info("the server said: %s", error.provider_message)
    shown = [str(error), repr(error), str(error.provider_message), caplog.text, repr(model)]
    for secret in SECRETS:
        assert not any(secret in text for text in shown), secret


def test_a_live_models_extra_header_credential_is_known_to_redaction() -> None:
    from rxllm.providers.openai import OpenAiRealtimeModel

    secret = "live-gw-token-0123456789"
    assert redact_secrets(f"x {secret} y") == f"x {secret} y"
    OpenAiRealtimeModel("gpt-realtime", base_url="ws://127.0.0.1:9", api_key="sk-live-0123456789",
                        extra_headers={"X-Live-Token": secret})
    assert redact_secrets(f"x {secret} y") == "x *** y"
