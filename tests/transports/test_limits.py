"""TransportLimits owns the transports' shared defaults (one rule, both constructors)."""

from __future__ import annotations

import pytest

from rxllm import AsyncHttpTransport, ConfigurationError, HttpTransport
from rxllm._transports.base import TransportLimits


def test_first_byte_timeout_defaults_to_read_timeout() -> None:
    assert TransportLimits(1, read_timeout=7.0).first_byte_timeout == 7.0
    assert TransportLimits(1, read_timeout=7.0, first_byte_timeout=2.0).first_byte_timeout == 2.0
    assert TransportLimits(1).first_byte_timeout == TransportLimits(1).read_timeout


@pytest.mark.parametrize("kind", [HttpTransport, AsyncHttpTransport])
def test_both_transports_take_the_rule_from_the_limits(kind: type[HttpTransport] | type[AsyncHttpTransport]) -> None:
    transport = kind(read_timeout=9.0)
    try:
        assert transport.limits.first_byte_timeout == 9.0
        assert transport.limits.request_timeouts()["read"] == 9.0
    finally:
        transport.close()


def test_a_first_byte_timeout_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="first_byte_timeout"):
        TransportLimits(1, first_byte_timeout=0.0)
