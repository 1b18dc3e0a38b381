"""Environment variables read on every model call or tool call, without ``os.environ``'s mapping machinery (private).

``name in os.environ`` and ``os.environ.get(name)`` go through ``collections.abc.Mapping``: an
``__getitem__`` that encodes the name, looks it up and, for a variable that is not set (the usual
case: ``OTEL_PYTHON_TRACER_PROVIDER``, ``RXLLM_MAX_TOOL_RESULT_BYTES``), raises and catches a
``KeyError``. An :class:`EnvVar` encodes its name once and looks it up in the dict ``os.environ``
keeps (``os.environ._data``), which every write through ``os.environ`` (``monkeypatch.setenv``,
``os.environ[...] = ...``, ``del``, ``putenv`` does not count, as for ``os.environ`` itself) updates
in place: the value read is the one ``os.environ.get(name)`` gives, read at each call. When
``os.environ`` is not the interpreter's own mapping (replaced by a test), it is asked as is.
"""

from __future__ import annotations

import os

__all__ = ["ENVIRON_TYPE", "EnvVar"]

ENVIRON_TYPE = type(os.environ)
"""The interpreter's ``os.environ`` type: ``key in os.environ._data`` is ``name in os.environ`` for it."""


class EnvVar:
    """One environment variable, read at each :meth:`get` (as ``os.environ.get(name)``)."""

    __slots__ = ("key", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.key = os.environ.encodekey(name)  # bytes on POSIX, upper str on Windows

    def get(self) -> str | None:
        """``os.environ.get(name)``."""
        environ = os.environ
        if type(environ) is ENVIRON_TYPE:
            raw = environ._data.get(self.key)  # type: ignore[attr-defined]
            return None if raw is None else environ.decodevalue(raw)
        return environ.get(self.name)

    def is_set(self) -> bool:
        """``name in os.environ``."""
        environ = os.environ
        if type(environ) is ENVIRON_TYPE:
            return self.key in environ._data  # type: ignore[attr-defined]
        return self.name in environ
