"""Fixtures for the CLI tests: pseudo-terminals closed after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .terminal import Terminal


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()
