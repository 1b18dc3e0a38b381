"""MCP's stdio transport, with the limits a toolset needs (imported only when a stdio server starts).

The ``mcp`` SDK's ``stdio_client`` is followed (newline-delimited JSON-RPC over the server's
stdin and stdout, the server in its own process group, the shutdown order of the MCP
specification: close stdin, wait, SIGTERM, SIGKILL), with three differences:

* **A message size limit** (``StdioServerParameters.max_message_bytes``): a line longer than it
  ends the session with that reason instead of buffering without bound.
* **Malformed JSON-RPC ends the session**: a line that starts like JSON (``{`` or ``[``) but is not
  a JSON-RPC message closes the connection, so calls waiting for an answer fail at once with the
  reason; other lines (a stray ``print``) are logged and skipped, as the SDK does.
* **Every server process is registered** until it is reaped, so an exit hook can kill what a
  toolset left open (:func:`kill_live_servers`), and the process id is reported to the caller.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ._params import StdioServerParameters

__all__ = ["kill_live_servers", "stdio_transport"]

_log = logging.getLogger("rxllm.mcp")

STDIN_CLOSE_GRACE = 1.0
"""Seconds a server may take to exit after its stdin closed, before SIGTERM (then as long again before SIGKILL)."""

_live: set[int] = set()
_live_lock = threading.Lock()


def kill_live_servers() -> None:
    """SIGKILL the process group of every stdio server not reaped yet (the process exit hook)."""
    with _live_lock:
        pids = list(_live)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


async def _wait_exit(process: anyio.abc.Process, seconds: float) -> bool:
    # returncode is polled, not process.wait(): that also waits for the pipes' EOF, which a
    # grandchild holding them would delay (the mcp SDK polls for the same reason).
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


async def _stop(process: anyio.abc.Process) -> None:
    with contextlib.suppress(Exception):
        await process.stdin.aclose()  # type: ignore[union-attr]
    if not await _wait_exit(process, STDIN_CLOSE_GRACE):
        for sig, wait in ((signal.SIGTERM, STDIN_CLOSE_GRACE), (signal.SIGKILL, STDIN_CLOSE_GRACE)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            if await _wait_exit(process, wait):
                break
        else:
            _log.warning("MCP server process %d is still alive after SIGKILL", process.pid)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()
    # asyncio's subprocess transport stays open (and warns when collected) until closed.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()
    with _live_lock:
        _live.discard(process.pid)


def _parse(line: bytes) -> SessionMessage | None:
    """The message on ``line``; None for a line that is not JSON at all; ValueError for bad JSON-RPC."""
    text = line.strip()
    if not text:
        return None
    if text[:1] not in (b"{", b"["):
        _log.warning("MCP server wrote a line that is not JSON-RPC to stdout; skipped: %r", text[:200])
        return None
    message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    return SessionMessage(message)


@contextlib.asynccontextmanager
async def stdio_transport(
    params: StdioServerParameters, on_started: Callable[[int], None], on_failure: Callable[[str], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server and yield the ``(read, write)`` streams an ``mcp.Client`` takes.

    ``on_started`` gets the process id; ``on_failure`` the reason the session ends, when the
    server broke the protocol (too large or malformed a message). The process is stopped when the
    context exits, even when the caller is cancelled.
    """
    env = get_default_environment() | dict(params.env or {})
    process = await anyio.open_process(
        [params.command, *params.args],
        env=env,
        cwd=params.cwd,
        stderr=params.stderr,
        start_new_session=True,
    )
    with _live_lock:
        _live.add(process.pid)
    on_started(process.pid)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    limit = params.max_message_bytes

    async def read() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        scanned = 0
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (newline := buffer.find(b"\n", scanned)) != -1:
                        line = bytes(buffer[:newline])
                        del buffer[: newline + 1]
                        scanned = 0
                        try:
                            message = _parse(line)
                        except ValueError as exc:
                            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                            on_failure(f"the server sent malformed JSON-RPC ({first})")
                            return
                        if message is not None:
                            await read_writer.send(message)
                    scanned = len(buffer)
                    if scanned > limit:
                        on_failure(f"the server sent a message larger than {limit} bytes")
                        return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass  # our own shutdown, or the server went away: the session sees the stream end

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the end instead of waiting for answers

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            group.start_soon(write)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    write_stream.close()
                    read_stream.close()
                    await _stop(process)
                group.cancel_scope.cancel()
    finally:
        if process.returncode is None:  # an error before the shutdown above ran
            with anyio.CancelScope(shield=True):
                await _stop(process)

