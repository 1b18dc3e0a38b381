"""The WebSocket transport tests' server: rxllm's own (``rxllm._transports.ws_server``, which the live
test kit runs on too), under the short names these tests use, and an echoing handler."""

from __future__ import annotations

from rxllm._transports.ws_server import PeerClosedError as PeerClosed
from rxllm._transports.ws_server import Refusal
from rxllm._transports.ws_server import ServerPeer as Peer
from rxllm._transports.ws_server import WebSocketServer as WsServer

__all__ = ["TIMEOUT", "Peer", "PeerClosed", "Refusal", "WsServer", "echo"]

TIMEOUT = 10.0  # a safety net for waits on events; nothing in a passing run waits for it


def echo(peer: Peer) -> None:
    """Send every message back until the client closes."""
    while True:
        peer.send_text(m) if isinstance(m := peer.recv(), str) else peer.send_bytes(m)
