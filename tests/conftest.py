"""Fixtures shared by the top-level test modules: a loopback stub server, and each transport in turn.

A module (or a sub-directory's ``conftest.py``) defining a fixture of the same name overrides these.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rxllm import AsyncHttpTransport, HttpTransport
from rxllm.testing import StubServer


@pytest.fixture
def server() -> Iterator[StubServer]:
    """A stub server on 127.0.0.1, stopped after the test."""
    with StubServer() as stub:
        yield stub


@pytest.fixture(params=["threads", "asyncio"])
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    """Each transport in turn (four connections), closed after the test."""
    made: HttpTransport | AsyncHttpTransport = (
        HttpTransport(max_concurrent_streams=4)
        if request.param == "threads"
        else AsyncHttpTransport(max_concurrent_streams=4)
    )
    yield made
    made.close()
