"""Logging tells the story and keeps secrets: a ``NullHandler`` on ``rxllm`` (an application that
configures no logging sees nothing on stderr), retries logged at WARNING with the reason and the
delay, and never the API key or the message contents.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from reactivex import operators as ops
from wire import OPENAI

import rxllm
from rxllm import Content, HttpTransport, LlmRequest, Part, RetryPolicy
from rxllm.testing import StubResponse, StubServer

ROOT = Path(__file__).resolve().parents[2]
SECRET_QUESTION = "my card number is 4111 1111 1111 1111"


def test_the_rxllm_logger_has_a_null_handler() -> None:
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("rxllm").handlers)


def test_a_retry_is_logged_with_reason_and_delay_and_no_key_or_content(caplog: pytest.LogCaptureFixture) -> None:
    transport = HttpTransport()
    try:
        with StubServer() as server:
            server.enqueue(StubResponse.json(503, {"error": {"message": "overloaded"}}), OPENAI.response("ok"))
            llm = OPENAI.model(
                server.url, transport=transport, api_key="sk-secret-key-123", retry_policy=RetryPolicy(base_delay=0.0)
            )
            request = LlmRequest(contents=(Content(role="user", parts=(Part.from_text(SECRET_QUESTION),)),))
            with caplog.at_level(logging.DEBUG, logger="rxllm"):
                final = llm.generate_content(request, stream=True).pipe(ops.last()).run()
    finally:
        transport.close()
    assert final.text() == "ok"
    retries = [r for r in caplog.records if r.name == "rxllm.retry"]
    assert len(retries) == 1 and retries[0].levelno == logging.WARNING
    message = retries[0].getMessage()
    assert "503" in message and "retrying in 0.000s" in message
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "sk-secret-key-123" not in logged
    assert "4111" not in logged


def test_an_application_without_logging_configured_sees_nothing_on_stderr() -> None:
    code = textwrap.dedent(
        """
        from reactivex import operators as ops
        from rxllm import Content, LlmRequest, Part, RetryPolicy
        from rxllm.providers.openai import OpenAiChatModel
        from rxllm.testing import StubResponse, StubServer, sse_turn
        with StubServer() as server:
            server.enqueue(StubResponse.json(503, {"error": {"message": "overloaded"}}))
            server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["ok"])))
            model = OpenAiChatModel("gpt-x", base_url=server.url + "/v1", api_key="sk-test",
                                    retry_policy=RetryPolicy(base_delay=0.0))
            request = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("hi"),)),))
            print(model.generate_content(request, stream=True).pipe(ops.last()).run().text())
        """
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "RXLLM_TELEMETRY": "off"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert done.stderr == ""  # the retry WARNING went to rxllm's NullHandler, not to Python's last-resort handler


def test_configure_telemetry_is_public() -> None:
    assert "configure_telemetry" in rxllm.__all__
