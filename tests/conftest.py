"""Fixtures shared by the test modules: a loopback stub server, each transport in turn, the collector off.

A module (or a sub-directory's ``conftest.py``) defining a fixture of the same name overrides these.
"""

from __future__ import annotations

import gc
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


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The garbage collector off for the test (after one full pass): only reference counting frees
    anything meanwhile, and ``gc.collect()`` finds what only the collector could have freed."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
