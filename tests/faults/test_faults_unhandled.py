"""Errors nobody handles are logged at ERROR on the ``rxllm`` logger, on both transports:
a subscriber without an ``on_error`` handler, and an ``on_next`` that raises."""

from __future__ import annotations

import logging
import threading

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, make_transport
from wire import OPENAI

from rxllm import RetryPolicy
from rxllm.testing import StubResponse, StubServer


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.seen.set()


@pytest.fixture
def captured() -> object:
    handler = _Captured()
    logger = logging.getLogger("rxllm")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_an_error_without_an_on_error_handler_is_logged(kind: str, captured: _Captured) -> None:
    transport = make_transport(kind)
    try:
        with StubServer([StubResponse.json(400, {"error": {"message": "bad request, nobody listening"}})]) as server:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            model.generate_content(REQUEST, stream=True).subscribe(on_next=lambda _: None)
            assert captured.seen.wait(TIMEOUT), "the unhandled error vanished"
    finally:
        transport.close()
    (record,) = captured.records
    assert record.name == "rxllm" and record.levelno == logging.ERROR
    assert "bad request, nobody listening" in record.getMessage()


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_an_on_next_that_raises_is_logged(kind: str, captured: _Captured) -> None:
    def explode(_: object) -> None:
        raise RuntimeError("subscriber bug")

    transport = make_transport(kind)
    try:
        with StubServer([OPENAI.response("a", "b")]) as server:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            model.generate_content(REQUEST, stream=True).subscribe(on_next=explode)
            assert captured.seen.wait(TIMEOUT), "the raising on_next vanished"
    finally:
        transport.close()
    assert any("subscriber bug" in r.getMessage() and r.levelno == logging.ERROR for r in captured.records)
