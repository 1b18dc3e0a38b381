"""Terminal styling that disappears when output is not a terminal (or ``NO_COLOR`` is set)."""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["Style"]


class Style:
    """Bold and dim text on a terminal; plain text when piped, so captures stay clean."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        """Styling on when ``stream`` is a terminal and ``NO_COLOR`` is unset."""
        isatty = getattr(stream, "isatty", None)
        return cls(bool(isatty and isatty()) and "NO_COLOR" not in os.environ)

    def bold(self, text: str) -> str:
        return f"\x1b[1m{text}\x1b[0m" if self.enabled else text

    def dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.enabled else text
