"""One redaction pass on every way out that is not the transport: an in-band provider error that
quotes the key after the first partial (the final's ``error_message``, the events and the
session's stored rows, ``rxllm chat``'s output), span status descriptions, names and
attributes, log records of rxllm and the HTTP libraries, chained errors; and keys normalised and
checked when a model is built. Real loopback servers, a real SQLite store, a real ``rxllm chat``.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from reactivex import operators as ops
from telemetry_support import Telemetry, telemetry  # noqa: F401  (the fixture)

from rxllm import (
    ConfigurationError,
    Content,
    HttpStatusError,
    HttpTransport,
    LlmRequest,
    Part,
    RetryPolicy,
    RxLlmError,
)
from rxllm._core.redact import redact_error, redact_secrets, register_secret
from rxllm.agents import LlmAgent, RunConfig, Runner, SqliteSessionService, StreamingMode
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import AzureOpenAiChatModel, OpenAiChatModel, OpenAiResponsesModel
from rxllm.testing import StubResponse, StubServer

KEY = "sk-proj-Zq81hostileKEY0000aa"
SSE = RunConfig(streaming_mode=StreamingMode.SSE)


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    payload = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def in_band_error_after_a_partial() -> StubResponse:
    error = {"error": {"message": f"upstream rejected key {KEY} for this project", "type": "invalid_request"}}
    return StubResponse(body=[_chunk({"role": "assistant", "content": "Hel"}),
                              b"data: " + json.dumps(error).encode() + b"\n\n"])


def model_on(server: StubServer, transport: HttpTransport, key: str = KEY) -> OpenAiChatModel:
    return OpenAiChatModel("m", base_url=server.url + "/v1", api_key=key, transport=transport,
                           retry_policy=RetryPolicy.never())


def test_a_key_read_from_a_file_keeps_no_newline_and_is_sent_stripped(tmp_path: Path) -> None:
    (tmp_path / "key").write_text(KEY + "\n")
    transport = HttpTransport(max_concurrent_streams=2)
    try:
        with StubServer([StubResponse(body=[_chunk({"content": "ok"}, "stop"), b"data: [DONE]\n\n"])]) as server:
            model = model_on(server, transport, key=(tmp_path / "key").read_text())
            responses = model.generate_content(
                LlmRequest(contents=(Content(role="user", parts=(Part.from_text("hi"),)),)),
                stream=True).pipe(ops.to_list()).run()
            [request] = server.requests
    finally:
        transport.close()
    assert responses[-1].text() == "ok"
    assert request.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("bad", [KEY[:8] + "\u201d" + KEY[8:], KEY[:5] + "\x00" + KEY[5:], KEY[:9] + "\n" + KEY[9:]],
                         ids=["typographic-quote", "nul", "inner-newline"])
def test_a_key_no_header_can_carry_is_refused_at_construction_without_quoting_it(bad: str) -> None:
    builders = [
        lambda: OpenAiChatModel("m", api_key=bad),
        lambda: OpenAiResponsesModel("m", api_key=bad),
        lambda: AnthropicModel("m", api_key=bad),
        lambda: GeminiModel("m", api_key=bad),
        lambda: AzureOpenAiChatModel("d", endpoint="https://r.openai.azure.com", api_version="1", api_key=bad),
        lambda: AzureOpenAiChatModel("d", endpoint="https://r.openai.azure.com", api_version="1", azure_ad_token=bad),
    ]
    for build in builders:
        with pytest.raises(ConfigurationError) as caught:
            build()
        text = f"{caught.value} {caught.value!r}"
        assert "no HTTP header can carry" in text
        assert KEY[:8] not in text and KEY[9:] not in text


def test_an_in_band_error_quoting_the_key_is_redacted_on_the_final_the_events_and_the_stored_rows(
    tmp_path: Path,
) -> None:
    transport = HttpTransport(max_concurrent_streams=2)
    path = tmp_path / "s.db"
    try:
        with SqliteSessionService(path) as sessions, StubServer([in_band_error_after_a_partial()]) as server:
            sessions.create_session("app", "u", session_id="s").run()
            runner = Runner(LlmAgent("bot", model_on(server, transport)), "app", sessions)
            events = runner.run_async("u", "s", Content(role="user", parts=(Part.from_text("hi"),)), SSE).pipe(
                ops.to_list()).run()
    finally:
        transport.close()
    finals = [e for e in events if not e.partial]
    assert finals and finals[-1].error_message is not None
    assert "***" in finals[-1].error_message and KEY not in finals[-1].error_message
    assert all(KEY not in e.model_dump_json() for e in events)
    with sqlite3.connect(path) as connection:
        rows = [row[0] for row in connection.execute("SELECT event FROM rxllm_events")]
    assert rows and all(KEY not in row for row in rows)
    assert any("***" in row for row in rows)


def test_rxllm_chat_prints_the_in_band_error_without_the_key() -> None:
    with StubServer([in_band_error_after_a_partial()]) as server:
        env = {**{k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}, "HOSTILE_KEY": KEY + "\n"}
        result = subprocess.run(
            [sys.executable, "-m", "rxllm", "chat", "--provider", "openai", "--model", "m",
             "--base-url", f"{server.url}/v1", "--api-key-env", "HOSTILE_KEY"],
            input="hello\n", capture_output=True, text=True, env=env, timeout=60, check=False,
        )
        [request] = server.requests
    assert result.returncode == 0, result.stderr
    assert request.headers["authorization"] == f"Bearer {KEY}"  # the file's newline is gone
    assert "error: the provider stopped the answer" in result.stdout and "***" in result.stdout
    assert KEY not in result.stdout + result.stderr


def test_the_attempt_spans_status_description_is_redacted_when_it_is_written(telemetry: Telemetry) -> None:  # noqa: F811
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    transport = HttpTransport(max_concurrent_streams=2)
    try:
        refused = StubResponse(status=401, body=[body], headers={"content-type": "application/json"})
        with StubServer([refused]) as server:
            model = model_on(server, transport)
            request = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("x"),)),))
            with pytest.raises(HttpStatusError) as caught:
                model.generate_content(request, stream=True).run()
    finally:
        transport.close()
    assert KEY not in str(caught.value)
    spans = telemetry.spans()
    assert spans
    for span in spans:
        assert KEY not in (span.status.description or ""), span.name
        assert KEY not in span.name
        assert all(KEY not in str(value) for value in (span.attributes or {}).values())
        assert all(KEY not in str(event.attributes) for event in span.events)
    assert any(span.status.description and "***" in span.status.description for span in spans)


def test_log_records_of_rxllm_and_the_http_libraries_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    register_secret(KEY)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("rxllm.retry").warning("attempt failed: %s", f"bad key {KEY}")
        logging.getLogger("httpx").info("HTTP Request: POST https://g.example/v1?key=%s", KEY)
        logging.getLogger("rxllm.some.later.module").warning("echo %s", KEY)  # a logger made after registering
        try:
            raise RuntimeError(f"inner {KEY}")
        except RuntimeError:
            logging.getLogger("rxllm").exception("outer")
    text = caplog.text
    assert KEY not in text, text
    assert text.count("***") >= 3


def test_a_chained_errors_messages_are_redacted_all_the_way_down() -> None:
    register_secret(KEY)
    inner = ValueError(f"header value {KEY!r} is not valid")
    middle = RuntimeError(f"wrapped {KEY}")
    middle.__context__ = inner
    outer = RxLlmError(f"call failed: {KEY}")
    outer.__cause__ = middle
    redact_error(outer)
    chain = [outer, middle, inner]
    assert all(KEY not in str(e) and KEY not in repr(e) for e in chain), [str(e) for e in chain]
    assert redact_secrets(f"  {KEY}  ") == "  ***  "
