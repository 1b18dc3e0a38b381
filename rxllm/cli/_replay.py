"""``rxllm replay``: a captured SSE body through the real parser and aggregator, with the contract's verdict.

A debugging tool for users' own captures: it prints what ``generate_content(stream=True)``
would have emitted for the bytes (each partial, then the final aggregate) and whether that
sequence follows the stream contract (:func:`rxllm.testing.assert_stream_protocol`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from .._core.errors import RxLlmError
from .._core.types import LlmResponse
from ..testing import PROTOCOLS, assert_stream_protocol, parser_for, replay_sse
from ._style import Style

__all__ = ["REPLAY_PROTOCOLS", "run_replay"]

REPLAY_PROTOCOLS = tuple(sorted(PROTOCOLS))
"""The protocols ``rxllm replay --protocol`` accepts."""


def run_replay(path: str, protocol: str, *, as_json: bool = False, out: TextIO, err: TextIO, style: Style) -> int:
    """Replay the SSE body in ``path`` as ``protocol`` and print partials, final and verdict.

    Args:
        path: the captured body (raw SSE bytes, as the HTTP client read them).
        protocol: one of :data:`REPLAY_PROTOCOLS`.
        as_json: print only the final, as genai-style JSON, on ``out`` (the verdict goes to ``err``).
        out: where the report is written.
        err: where errors (and the verdict with ``as_json``) are written.
        style: terminal styling (off when ``out`` is not a terminal).

    Returns:
        0 when the stream follows the contract; 1 when it is malformed or breaks the contract;
        2 when the file cannot be read.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        err.write(f"rxllm replay: cannot read {path}: {exc.strerror or exc}\n")
        return 2
    verdict_out = err if as_json else out
    try:
        responses = replay_sse(data, parser_for(protocol))
    except RxLlmError as exc:
        verdict_out.write(f"contract: BROKEN — malformed stream: {exc}\n")
        return 1
    if as_json:
        out.write(json.dumps(responses[-1].model_dump(mode="json", by_alias=True, exclude_none=True), indent=2,
                             ensure_ascii=False) + "\n")
    else:
        _print_partials(responses[:-1], out, style)
        _print_final(responses[-1], out, style)
    try:
        assert_stream_protocol(responses)
    except AssertionError as exc:
        verdict_out.write(f"contract: BROKEN — {exc}\n")
        return 1
    verdict_out.write("contract: OK\n")
    return 0


def _print_partials(partials: list[LlmResponse], out: TextIO, style: Style) -> None:
    out.write(style.bold(f"partials ({len(partials)})") + "\n")
    width = len(str(len(partials)))
    for number, partial in enumerate(partials, 1):
        pieces = []
        if partial.thought_text():
            pieces.append(f"thought {partial.thought_text()!r}")
        if partial.text():
            pieces.append(f"text {partial.text()!r}")
        if partial.function_calls():
            pieces.append(f"{len(partial.function_calls())} function call(s)")
        if partial.usage_metadata is not None:
            pieces.append("usage")
        out.write(f"  {number:>{width}}. {'; '.join(pieces) or '(empty)'}\n")


def _print_final(final: LlmResponse, out: TextIO, style: Style) -> None:
    out.write(style.bold("final") + "\n")
    rows: list[tuple[str, str]] = []
    if final.text():
        rows.append(("text", repr(final.text())))
    if final.thought_text():
        rows.append(("thought", repr(final.thought_text())))
    for call in final.function_calls():
        ident = f" (id {call.id})" if call.id else ""
        rows.append(("tool call", f"{call.name}({json.dumps(call.args, ensure_ascii=False)}){ident}"))
    if final.finish_reason is not None:
        raw = (final.custom_metadata or {}).get("finish_reason")
        shown = f" (provider: {raw})" if isinstance(raw, str) and raw != final.finish_reason.value else ""
        rows.append(("finish reason", final.finish_reason.value + shown))
    usage = final.usage_metadata
    if usage is not None:
        text = (f"{usage.prompt_token_count} prompt + {usage.candidates_token_count} output "
                f"= {usage.total_token_count} tokens")
        if usage.thoughts_token_count:
            text += f" ({usage.thoughts_token_count} thinking)"
        if usage.cached_content_token_count:
            text += f" ({usage.cached_content_token_count} cached)"
        rows.append(("usage", text))
    if final.error_code is not None or final.error_message is not None:
        rows.append(("error", f"{final.error_code or '-'}: {final.error_message or ''}"))
    if final.model_version:
        rows.append(("model", final.model_version))
    if not rows:
        rows.append(("(empty)", ""))
    for label, value in rows:
        out.write(f"  {label + ':':<15}{value}\n")
