"""Folders of recorded SSE bodies as test cases: one :class:`SseRecording` per file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._core.errors import ConfigurationError
from .._core.types import LlmResponse
from ._replay import PROTOCOLS, parser_for, replay_sse

__all__ = ["SseRecording", "load_sse_recordings"]


@dataclass(frozen=True)
class SseRecording:
    """One recorded response body and the protocol it speaks.

    Attributes:
        path: the recording's file.
        protocol: a name from :data:`~rxllm.testing.PROTOCOLS`.
        name: the path relative to the folder it was found in, without the suffix (a test id).
    """

    path: Path
    protocol: str
    name: str

    @property
    def body(self) -> bytes:
        """The recorded bytes."""
        return self.path.read_bytes()

    def replay(self) -> list[LlmResponse]:
        """What ``generate_content(stream=True)`` would emit for it (:func:`~rxllm.testing.replay_sse`)."""
        return replay_sse(self.body, parser_for(self.protocol))

    def expected(self) -> Any | None:
        """The parsed ``<name>.expected.json`` beside the recording, or ``None`` if there is none."""
        sibling = self.path.with_name(self.path.name.removesuffix(self.path.suffix) + ".expected.json")
        return json.loads(sibling.read_text(encoding="utf-8")) if sibling.is_file() else None


def load_sse_recordings(
    folder: str | Path, *, protocol: str | None = None, pattern: str = "**/*.sse"
) -> list[SseRecording]:
    """Every recording under ``folder`` matching ``pattern``, sorted by path.

    The protocol of each file is ``protocol`` when given; else the one a ``manifest.json`` in
    ``folder`` lists for it (entries ``{"file": ..., "protocol": ...}``); else the name of the
    file's directory when that is a protocol name (``anthropic/``, ``gemini/``,
    ``openai-chat/``, ``openai-responses/``).

    Raises:
        ConfigurationError: the folder does not exist, holds no recording, or a file's protocol
            cannot be told.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "openai-chat").mkdir(), (folder / "openai-chat" / "hi.sse").write_bytes(
    ...     b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\\n\\ndata: [DONE]\\n\\n')
    >>> [(r.name, r.protocol, r.replay()[-1].text()) for r in load_sse_recordings(folder)]
    [('openai-chat/hi', 'openai-chat', 'Hi')]
    """
    root = Path(folder)
    if not root.is_dir():
        raise ConfigurationError(f"no folder of SSE recordings at {str(root)!r}")
    if protocol is not None:
        parser_for(protocol)  # fail early on an unknown name
    manifest = _manifest(root)
    found: list[SseRecording] = []
    for path in sorted(p for p in root.glob(pattern) if p.is_file()):
        relative = path.relative_to(root)
        name = relative.with_suffix("").as_posix()
        chosen = protocol or manifest.get(relative.as_posix()) or _from_directory(path)
        if chosen is None:
            raise ConfigurationError(
                f"cannot tell the protocol of {relative.as_posix()!r}: pass protocol=, list it in a manifest.json, "
                f"or put it in a folder named after its protocol ({', '.join(sorted(PROTOCOLS))})"
            )
        found.append(SseRecording(path=path, protocol=chosen, name=name))
    if not found:
        raise ConfigurationError(f"no SSE recordings matching {pattern!r} under {str(root)!r}")
    return found


def _manifest(root: Path) -> dict[str, str]:
    path = root / "manifest.json"
    if not path.is_file():
        return {}
    entries = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(entries, list):
        return {}
    return {
        str(entry["file"]): str(entry["protocol"])
        for entry in entries
        if isinstance(entry, dict) and "file" in entry and "protocol" in entry
    }


def _from_directory(path: Path) -> str | None:
    return path.parent.name if path.parent.name in PROTOCOLS else None
