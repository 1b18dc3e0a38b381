"""What every ready-made provider model shares: its transport options and API-key lookup."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypedDict

from reactivex import abc as rx_abc

from .._errors import ConfigurationError
from .._http import HttpTransport
from .._retry import RetryPolicy

__all__ = ["SseModelOptions", "resolve_api_key"]


class SseModelOptions(TypedDict, total=False):
    """Keyword options every provider model passes to :class:`~rxllm.SseChatModel`.

    Keys: ``transport`` (:class:`~rxllm.HttpTransport`), ``scheduler`` (where blocking I/O runs),
    ``retry_policy`` (:class:`~rxllm.RetryPolicy`), ``timer_scheduler`` (retry timers),
    ``max_line_bytes`` (the SSE line cap).
    """

    transport: HttpTransport
    scheduler: rx_abc.SchedulerBase
    retry_policy: RetryPolicy
    timer_scheduler: rx_abc.SchedulerBase
    max_line_bytes: int


def resolve_api_key(api_key: str | None, env_vars: Sequence[str], *, required: bool, provider: str) -> str | None:
    """``api_key``, else the first non-empty environment variable of ``env_vars``.

    Raises:
        ConfigurationError: when ``required`` and no key was found (the message names the
            variables, never a value).
    """
    if api_key:
        return api_key
    for name in env_vars:
        value = os.environ.get(name)
        if value:
            return value
    if required:
        names = " or ".join(env_vars)
        raise ConfigurationError(f"no API key: pass api_key=... or set {names}", provider=provider)
    return None
