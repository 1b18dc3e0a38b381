"""``rxllm chat``: an interactive streaming chat against a real endpoint.

Each answer streams to the terminal as it arrives (``generate_content(request, stream=True)``).
Ctrl-C during an answer disposes its subscription, which closes the connection at once; the
half answer and its question are dropped from the conversation and the prompt comes back.
Ctrl-C, Ctrl-D (EOF) or ``/exit`` at the prompt ends the chat with exit code 0. Transport and
HTTP errors print one line and return to the prompt.

On a terminal, the answer's line shows a dim ``thinking…`` from the moment the question is sent
until the first token arrives (then it is erased with backspaces, which every terminal honours);
piped output never carries it. A line starting with ``/`` is a chat command, answered here and
never sent to the model (``/help`` lists them); ``//`` sends a line that starts with ``/``. A
resumed session shows its last turns before the first prompt.

The SIGINT path: Python delivers SIGINT to the main thread, which is waiting for the answer in
an interruptible ``Event.wait`` loop; the partials are written by the I/O thread under a lock
that the main thread takes to mark the answer cancelled, so nothing of a cancelled answer is
written after ``[cancelled]``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TextIO

import reactivex
from reactivex import abc as rx_abc

from .._core.errors import ConfigurationError, HttpStatusError, RxLlmError, TransportError
from .._core.redact import redact_secrets
from .._core.types import Content, GenerateContentConfig, LlmRequest, LlmResponse, Part
from .._models.base_llm import BaseLlm
from ..providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from ..providers.anthropic import AnthropicModel
from ..providers.gemini import DEFAULT_BASE_URL as GEMINI_URL
from ..providers.gemini import GeminiModel
from ..providers.openai import DEFAULT_BASE_URL as OPENAI_URL
from ..providers.openai import OpenAiChatModel
from ._sessions import ChatSession, close_store, open_store
from ._style import Style

__all__ = ["CHAT_PROVIDERS", "KEY_VARIABLES", "run_chat"]


CHAT_PROVIDERS = ("anthropic", "gemini", "openai")
"""The providers ``rxllm chat --provider`` accepts."""

KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
"""The environment variables each provider's key is read from, in lookup order."""

EXIT_COMMANDS = frozenset({"/exit", "/quit"})
COMMANDS: dict[str, str] = {
    "/help": "show these commands",
    "/history": "show the whole conversation so far",
    "/clear": "forget the conversation (and delete it from the session store): the next question starts afresh",
    "/exit": "leave the chat (also /quit, Ctrl-D, or Ctrl-C at the prompt)",
}
"""The chat's own commands, answered locally and never sent to the model."""
PROMPT = "you › "
THINKING = "thinking…"
"""Shown (on a terminal) in the answer's place until the first token arrives."""
RESUMED_TURNS = 6
"""How many of a resumed session's last messages are shown before the first prompt."""
_WAIT_TICK = 0.1  # how often the main thread re-enters Event.wait (SIGINT also interrupts it at once)


def _make_model(provider: str, model: str, base_url: str | None, api_key_env: str | None) -> BaseLlm:
    """The provider's model. The key comes from the environment, never from the command line: the
    provider's usual variable for its public endpoint, or the variable named by ``api_key_env``."""
    api_key = os.environ.get(api_key_env) if api_key_env else None
    if provider == "anthropic":
        return AnthropicModel(model, base_url=base_url or ANTHROPIC_URL, api_key=api_key)
    if provider == "gemini":
        return GeminiModel(model, base_url=base_url or GEMINI_URL, api_key=api_key)
    return OpenAiChatModel(model, base_url=base_url or OPENAI_URL, api_key=api_key)


def _configuration_message(provider: str, error: ConfigurationError) -> str:
    names = KEY_VARIABLES.get(provider, ())
    if names and not any(os.environ.get(name) for name in names):
        return (f"rxllm chat: no API key for {provider}: set {' or '.join(names)} "
                "(or pass --base-url for a local OpenAI-compatible server)")
    return redact_secrets(f"rxllm chat: {error.message}")


def error_line(error: BaseException, provider: str) -> str:
    """One line describing why an answer failed (no traceback, never a key: see ``rxllm._core.redact``)."""
    return redact_secrets(_error_line(error, provider))


def _error_line(error: BaseException, provider: str) -> str:
    if isinstance(error, HttpStatusError):
        hint = ""
        if error.status_code in (401, 403):
            hint = f" (the key is read from {' or '.join(KEY_VARIABLES.get(provider, ('the environment',)))})"
        return f"error: the server answered {error.message}{hint}"
    if isinstance(error, TransportError):
        return f"error: could not reach the server: {error.message}"
    if isinstance(error, RxLlmError):
        return f"error: {error.message}"
    return f"error: {type(error).__name__}: {error}"


class _Answer:
    """One answer in flight: writes partials as they arrive, unless cancelled."""

    def __init__(self, label: str, label_width: int, out: TextIO, style: Style) -> None:
        self._label = label
        self._label_width = label_width  # the label's width on screen (without its escape sequences)
        self._out = out
        self._style = style
        self._lock = threading.Lock()
        self._cancelled = False
        self._mode: str | None = None  # None (nothing written yet), "thought" or "text"
        self._thinking = False  # the label and THINKING are on screen, nothing else yet
        self.done = threading.Event()
        self.final: LlmResponse | None = None
        self.error: Exception | None = None

    @property
    def wrote_anything(self) -> bool:
        return self._mode is not None

    def on_next(self, response: LlmResponse) -> None:
        with self._lock:
            if self._cancelled:
                return
            if not response.partial:
                self.final = response
                return
            self._write_delta(response.thought_text(), "thought")
            self._write_delta(response.text(), "text")
            self._out.flush()

    def show_thinking(self) -> None:
        """Write the label and a dim ``thinking…``; the first token (or the end) erases it."""
        with self._lock:
            self._out.write(self._label + self._style.dim(THINKING))
            self._out.flush()
            self._thinking = True

    def _erase(self, width: int) -> None:
        self._out.write("\b" * width + " " * width + "\b" * width)

    def clear_thinking(self) -> None:
        """Erase the indicator and its label when nothing of the answer was written (a no-op otherwise)."""
        with self._lock:
            if self._thinking:
                self._erase(self._label_width + len(THINKING))
                self._out.flush()
                self._thinking = False

    def _write_delta(self, delta: str, mode: str) -> None:
        if not delta:
            return
        if mode != self._mode:
            if self._thinking:  # the label stays; the indicator gives way to the answer
                self._erase(len(THINKING))
                self._thinking = False
            elif self._mode is None:
                self._out.write(self._label)
            else:
                self._out.write("\n")
            if mode == "thought":
                self._out.write(self._style.dim("(thinking) "))
            self._mode = mode
        self._out.write(self._style.dim(delta) if mode == "thought" else delta)

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def on_completed(self) -> None:
        self.done.set()

    def cancel(self) -> None:
        """Stop writing: after this returns, no callback writes anything more."""
        with self._lock:
            self._cancelled = True


class _Chat:
    def __init__(
        self,
        provider: str,
        llm: BaseLlm,
        system: str | None,
        out: TextIO,
        style: Style,
        store: ChatSession | None,
        *,
        thinking: bool,
    ) -> None:
        self._provider = provider
        self._llm = llm
        self._config = GenerateContentConfig(system_instruction=system) if system else GenerateContentConfig()
        self._out = out
        self._style = style
        self._store = store
        self._thinking = thinking
        self.history: list[tuple[str, Content]] = store.entries() if store is not None else []

    def show(self, entries: list[tuple[str, Content]]) -> None:
        """Write stored messages dimmed, one ``author › text`` block each."""
        for author, content in entries:
            who = "you" if content.role == "user" else author
            self._out.write(self._style.dim(f"{who} › {content.text()}") + "\n")

    def command(self, text: str) -> bool:
        """Answer a ``/command`` locally; False when it is ``/exit``."""
        out, style = self._out, self._style
        name = text.split()[0].lower()
        if name in EXIT_COMMANDS:
            return False
        if name == "/help":
            width = max(len(c) for c in COMMANDS)
            for command, what in COMMANDS.items():
                out.write(f"{command.ljust(width)}  {what}\n")
            out.write(style.dim("A line starting with // is sent to the model with one /; "
                                "anything else starting with / is a command.") + "\n")
        elif name == "/history":
            if self.history:
                self.show(self.history)
            else:
                out.write(style.dim("(no conversation yet)") + "\n")
        elif name == "/clear":
            count = len(self.history)
            self.history = []
            kept = ""
            if self._store is not None:
                try:
                    self._store.clear()
                    kept = " and from the session store"
                except RxLlmError as exc:
                    kept = f" (the session store still has them: {exc.message})"
            out.write(style.dim(f"cleared {count} messages from the conversation{kept}.") + "\n")
        else:
            out.write(f"unknown command {name}: /help lists the commands "
                      "(start the line with // to send it to the model)\n")
        out.flush()
        return True

    def turn(self, text: str) -> None:
        """Ask, stream the answer, and keep the exchange only when it completed cleanly."""
        out, style = self._out, self._style
        question = Content(role="user", parts=(Part.from_text(text),))
        contents = (*(content for _, content in self.history), question)
        request = LlmRequest(contents=contents, config=self._config)
        answer = _Answer(style.bold(self._llm.model) + " › ", len(self._llm.model) + 3, out, style)
        subscription: rx_abc.DisposableBase | None = None
        observable: reactivex.Observable[LlmResponse] = self._llm.generate_content(request, stream=True)
        if self._thinking:
            answer.show_thinking()
        try:
            subscription = observable.subscribe(answer.on_next, answer.on_error, answer.on_completed)
            while not answer.done.wait(_WAIT_TICK):
                pass
        except KeyboardInterrupt:
            answer.cancel()
            if subscription is not None:
                subscription.dispose()  # closes the connection at once
            answer.clear_thinking()
            out.write(("\n" if answer.wrote_anything else "") + style.dim("[cancelled]") + "\n")
            out.flush()
            return
        answer.clear_thinking()
        if answer.wrote_anything:
            out.write("\n")
        final = answer.final
        if answer.error is not None or final is None:
            error = answer.error or RxLlmError("the stream ended without a final response")
            out.write(error_line(error, self._provider) + "\n")
        elif final.error_code or final.error_message:
            code = f"{final.error_code}: " if final.error_code else ""
            stopped = f"error: the provider stopped the answer: {code}{final.error_message or ''}"
            out.write(redact_secrets(stopped) + "\n")
        elif final.content is None or not final.content.parts:
            out.write(style.dim("(empty answer)") + "\n")
        else:
            if not answer.wrote_anything and final.text():  # a provider that sent the whole answer at once
                out.write(f"{style.bold(self._llm.model)} › {final.text()}\n")
            answer_content = final.content.model_copy(update={"role": "model"})
            self.history += [("user", question), (self._llm.model, answer_content)]
            if self._store is not None:
                try:
                    self._store.record(question, answer_content, author=self._llm.model)
                except RxLlmError as exc:
                    unsaved = f"error: the exchange was not saved to the session store: {exc.message}"
                    out.write(redact_secrets(unsaved) + "\n")
        out.flush()


def run_chat(
    *,
    provider: str,
    model: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    system: str | None = None,
    out: TextIO,
    err: TextIO,
    style: Style,
    read_line: Callable[[str], str] = input,
    session_store: str | None = None,
    session_id: str = "default",
    user_id: str = "user",
    thinking: bool | None = None,
) -> int:
    """Run the interactive chat; returns the exit code.

    Args:
        provider: ``"openai"`` (any OpenAI-compatible server with ``base_url``), ``"anthropic"``
            or ``"gemini"``.
        model: the model name.
        base_url: the API root; the provider's public endpoint when ``None``.
        api_key_env: the environment variable holding the key for ``base_url`` (e.g.
            ``GROQ_API_KEY``); the provider's own variable is used for its public endpoint only.
        system: a system instruction for every turn.
        out: where the conversation is written.
        err: where a fatal error (no key) is written.
        style: terminal styling (off when ``out`` is not a terminal).
        read_line: reads one line after writing the prompt; raises ``EOFError`` at the end of
            input and ``KeyboardInterrupt`` on Ctrl-C (``input`` does both).
        session_store: a session store URL (``sqlite:///chat.db``, ``postgresql://...``): the
            conversation is loaded from it and every whole exchange is stored, so the next chat
            with the same store, ``session_id`` and ``user_id`` resumes it. None: nothing is kept.
        session_id: the conversation's session id in the store.
        user_id: the user the session belongs to.
        thinking: show ``thinking…`` until an answer's first token; ``None`` (the default): only
            when ``out`` is a terminal.

    Returns:
        0 when the user leaves; 2 when the model or the session store cannot be set up.
    """
    try:
        llm = _make_model(provider, model, base_url, api_key_env)
    except ConfigurationError as exc:
        err.write(_configuration_message(provider, exc) + "\n")
        err.flush()
        return 2
    service = None
    store: ChatSession | None = None
    if session_store is not None:
        try:
            service = open_store(session_store)
            store = ChatSession(service, user_id, session_id)
        except RxLlmError as exc:
            if service is not None:
                close_store(service)
            err.write(redact_secrets(f"rxllm chat: cannot use the session store: {exc.message}\n"))
            err.flush()
            return 2
    if thinking is None:
        isatty = getattr(out, "isatty", None)
        thinking = bool(isatty and isatty())
    try:
        return _chat_loop(provider, model, base_url, system, llm, store, out, style, read_line, thinking)
    finally:
        if service is not None:
            close_store(service)


def _chat_loop(
    provider: str,
    model: str,
    base_url: str | None,
    system: str | None,
    llm: BaseLlm,
    store: ChatSession | None,
    out: TextIO,
    style: Style,
    read_line: Callable[[str], str],
    thinking: bool,
) -> int:
    where = base_url or "the provider's public endpoint"
    out.write(style.dim(f"rxllm chat: {provider} model {model!r} at {where}.") + "\n"
              + style.dim("Ctrl-C cancels an answer; /help lists the commands; /exit, Ctrl-D or Ctrl-C at the "
                          "prompt quits.") + "\n")
    chat = _Chat(provider, llm, system, out, style, store, thinking=thinking)
    if store is not None:
        count = len(chat.history)
        resumed = f"resumed session {store.session_id!r}: {count} messages" if store.resumed else (
            f"new session {store.session_id!r}")
        out.write(style.dim(f"{resumed} (kept in the session store).") + "\n")
        if chat.history:
            earlier = count - RESUMED_TURNS
            if earlier > 0:
                out.write(style.dim(f"… {earlier} earlier messages (/history shows them all)") + "\n")
            chat.show(chat.history[-RESUMED_TURNS:])
    out.flush()
    while True:
        try:
            line = read_line(PROMPT)
        except (EOFError, KeyboardInterrupt):
            out.write("\n")
            out.flush()
            return 0
        text = line.strip()
        if not text:
            continue
        if text.startswith("//"):
            text = text[1:]
        elif text.startswith("/"):
            if not chat.command(text):
                return 0
            continue
        try:
            chat.turn(text)
        except KeyboardInterrupt:  # a Ctrl-C just after the answer ended: nothing to cancel
            out.write("\n")
            out.flush()
