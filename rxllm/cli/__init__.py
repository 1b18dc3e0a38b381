"""The ``rxllm`` command: ``demo``, ``chat``, ``replay``, ``sessions``, ``mcp-serve`` (also ``python -m rxllm``).

The top room below the front doors: it may import every other room (it uses ``agents``,
``providers``, ``testing``, ``_models`` and ``_core``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from .._core.version import __version__
from ._chat import CHAT_PROVIDERS, run_chat
from ._demo import PROVIDERS, run_demo
from ._live import LIVE_PROVIDERS, run_live
from ._mcp_serve import run_mcp_serve
from ._replay import REPLAY_PROTOCOLS, run_replay
from ._sessions import CHAT_APP, default_user, run_sessions
from ._style import Style
from ._web import add_eval_parser, add_server_parsers, run_eval, run_server

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rxllm", description="LLM streams as ReactiveX Observables.")
    parser.add_argument("--version", action="version", version=f"rxllm {__version__}",
                        help="print rxllm's version and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the order-A17 agent against an embedded local provider")
    demo.add_argument("--provider", choices=sorted(PROVIDERS), default="openai",
                      help="the wire format the local provider speaks (default: openai)")
    demo.add_argument("--pace", type=float, default=0.04, metavar="SECONDS",
                      help="pause between streamed events, like a real model (default: 0.04; 0 for none)")
    chat = commands.add_parser(
        "chat", help="chat with a real model, streaming (Ctrl-C cancels an answer)",
        description="An interactive streaming chat (/help at the prompt lists its commands). The key comes "
                    "from OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY/GOOGLE_API_KEY; a local "
                    "OpenAI-compatible server (Ollama, vLLM, llama.cpp) needs none: "
                    "rxllm chat --provider openai --model llama3.2 --base-url http://127.0.0.1:11434/v1",
    )
    chat.add_argument("--provider", choices=CHAT_PROVIDERS, required=True,
                      help="the API to speak (openai also means any OpenAI-compatible server)")
    chat.add_argument("--model", required=True, help="the model name, e.g. gpt-4o-mini")
    chat.add_argument("--base-url", metavar="URL",
                      help="the API root (default: the provider's public endpoint), e.g. http://127.0.0.1:11434/v1")
    chat.add_argument("--api-key-env", metavar="NAME",
                      help="the environment variable holding the key for --base-url, e.g. GROQ_API_KEY "
                           "(the provider's own variable is only sent to its public endpoint)")
    chat.add_argument("--system", metavar="TEXT", help="a system instruction for the whole conversation")
    chat.add_argument("--session", metavar="URL",
                      help="keep the conversation in a session store and resume it next time: "
                           "sqlite:///chat.db or postgresql://user@host/db")
    chat.add_argument("--session-id", metavar="ID", default="default",
                      help="which conversation of the store (default: default)")
    chat.add_argument("--user", metavar="ID", help="the user the session belongs to (default: your login name)")
    live = commands.add_parser("live", help="a live (BIDI) session: text in, text and transcript out "
                                            "(an embedded stub by default)")
    live.add_argument("--provider", choices=LIVE_PROVIDERS, required=True, help="the live protocol to speak")
    live.add_argument("--model", help="the model name (default: gemini-live-2.5-flash or gpt-realtime)")
    live.add_argument("--base-url", metavar="URL", help="a real endpoint (default: an embedded loopback stub)")
    live.add_argument("--api-key-env", metavar="NAME", help="the environment variable holding the key for --base-url")
    live.add_argument("--audio-in", metavar="FILE.wav", help="stream a 16-bit mono PCM WAV file in 20 ms frames")
    sessions = commands.add_parser("sessions", help="list, show or delete the sessions in a session store")
    sessions.add_argument("action", choices=("list", "show", "delete"))
    sessions.add_argument("session_id", nargs="?", metavar="ID", help="the session (show, delete)")
    sessions.add_argument("--store", "--session", dest="store", metavar="URL", required=True,
                          help="sqlite:///chat.db or postgresql://user@host/db")
    sessions.add_argument("--app", default=CHAT_APP, help=f"the app name (default: {CHAT_APP}, rxllm chat's)")
    sessions.add_argument("--user", metavar="ID", help="the user (default: your login name)")
    replay = commands.add_parser("replay", help="replay a captured SSE body: partials, final aggregate, contract")
    replay.add_argument("file", metavar="FILE.sse", help="the raw response body, as the HTTP client read it")
    replay.add_argument("--protocol", choices=REPLAY_PROTOCOLS, required=True, help="the wire protocol of the body")
    replay.add_argument("--json", action="store_true", dest="as_json",
                        help="print only the final aggregate, as genai-style JSON (the verdict goes to stderr)")
    mcp_serve = commands.add_parser("mcp-serve", help="serve a module's tools over MCP (needs the mcp extra)")
    mcp_serve.add_argument("target", metavar="MODULE:ATTR", help="a list of tools (or one tool), e.g. my_tools:tools")
    mcp_serve.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                           help="stdio (default) or streamable-http")
    mcp_serve.add_argument("--host", default="127.0.0.1", help="streamable-http: the address (default: 127.0.0.1)")
    mcp_serve.add_argument("--port", type=int, default=8000, help="streamable-http: the port (default: 8000)")
    mcp_serve.add_argument("--path", default="/mcp", help="streamable-http: the endpoint path (default: /mcp)")
    mcp_serve.add_argument("--name", default="rxllm", help="the server name in the MCP handshake")
    add_server_parsers(commands)
    add_eval_parser(commands)
    return parser


def _enable_line_editing() -> None:
    """Arrow keys and history at the chat prompt, when both ends are a terminal (never when piped)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (importing it is what makes input() use it)


def _restore_ctrl_c() -> None:
    """Make Ctrl-C raise KeyboardInterrupt even when SIGINT was inherited ignored (a background job, nohup).

    Python keeps an inherited ``SIG_IGN``; the chat's Ctrl-C (cancel the answer) depends on the signal.
    """
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    out = sys.stdout
    style = Style.for_stream(out)
    if args.command == "demo":
        return run_demo(provider=args.provider, pace=args.pace, out=out, style=style)
    if args.command == "chat":
        _enable_line_editing()
        _restore_ctrl_c()
        # Retries before the first item are logged as warnings; in the chat the outcome is what counts.
        logging.getLogger("rxllm").addHandler(logging.NullHandler())
        return run_chat(provider=args.provider, model=args.model, base_url=args.base_url,
                        api_key_env=args.api_key_env, system=args.system,
                        out=out, err=sys.stderr, style=style,
                        session_store=args.session, session_id=args.session_id, user_id=args.user or default_user())
    if args.command == "live":
        return run_live(provider=args.provider, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                        audio_in=args.audio_in, stdin=sys.stdin, out=out, err=sys.stderr, style=style)
    if args.command == "sessions":
        if args.action != "list" and not args.session_id:
            print(f"rxllm sessions {args.action}: which session? (rxllm sessions {args.action} ID --store URL)",
                  file=sys.stderr)
            return 2
        return run_sessions(args.action, store=args.store, app_name=args.app, user_id=args.user or default_user(),
                            session_id=args.session_id, out=out, err=sys.stderr)
    if args.command == "replay":
        return run_replay(args.file, args.protocol, as_json=args.as_json, out=out, err=sys.stderr, style=style)
    if args.command == "mcp-serve":
        return run_mcp_serve(args.target, transport=args.transport, host=args.host, port=args.port, path=args.path,
                             name=args.name, err=sys.stderr)
    if args.command in ("api-server", "web"):
        return run_server(args, err=sys.stderr)
    if args.command == "eval":
        return run_eval(args, out=out, err=sys.stderr)
    return 2
