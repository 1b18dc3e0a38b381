"""``python -m rxllm`` on a real pseudo-terminal, and what a terminal shows of its output."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

fcntl = pytest.importorskip("fcntl", reason="pseudo-terminals are POSIX only")

__all__ = ["KEY_VARIABLES", "Terminal", "render"]

# The child makes the pty its controlling terminal (so the tty line discipline turns \x03 into
# SIGINT for it), then becomes ``python -m rxllm``. start_new_session=True gives it a session to own.
_CTTY = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'rxllm', *sys.argv[1:]])"
)
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


class Terminal:
    """``python -m rxllm <args>`` on a pseudo-terminal; reads are select-driven with a deadline."""

    def __init__(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
        env["TERM"] = "dumb"
        master, slave = os.openpty()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CTTY, *args],
                stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, close_fds=True,
            )
        finally:
            os.close(slave)
        flags = fcntl.fcntl(master, fcntl.F_GETFL)
        fcntl.fcntl(master, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self.master = master
        self.output = b""
        self._seen = 0  # output before this offset was already matched

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def expect(self, needle: str, timeout: float = 10.0) -> str:
        """Read until ``needle`` appears after the last match; return the text up to and including it."""
        wanted = needle.encode()
        deadline = time.monotonic() + timeout
        while (found := self.output.find(wanted, self._seen)) < 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._read(remaining):
                raise AssertionError(f"{needle!r} did not appear; the terminal shows {self.text()!r}")
        start, self._seen = self._seen, found + len(wanted)
        return self.output[start : self._seen].decode(errors="replace")

    def expect_end(self, ending: str, timeout: float = 10.0) -> list[str]:
        """Read until the output so far ends with ``ending`` (a prompt waiting for input, not the same
        text inside an earlier line); return the screen."""
        wanted = ending.encode()
        deadline = time.monotonic() + timeout
        while not self.output.endswith(wanted) or len(self.output) <= self._seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._read(remaining):
                raise AssertionError(f"the output never ended with {ending!r}; the terminal shows {self.text()!r}")
        self._seen = len(self.output)
        return self.screen()

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True  # the deadline check ends the loop
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return True
        except OSError:  # EIO: the child closed the terminal
            return False
        self.output += data
        return bool(data)

    def text(self) -> str:
        return self.output.decode(errors="replace")

    def screen(self) -> list[str]:
        """The lines as a terminal shows them so far (see :func:`render`)."""
        return render(self.text())

    def wait_until_reading(self, timeout: float = 10.0) -> None:
        """Wait until the chat's main thread sleeps in readline's ``select`` on the terminal.

        Readline shows the prompt before it reaches its ``select``; a SIGINT landing in between
        sets Python's flag but interrupts no call, so nothing checks it until the next key (a
        CPython readline race, hit about 1 time in 4 on a busy machine when \\x03 is typed the
        moment the prompt appears; a person is never that fast). The kernel's ``wchan`` says where
        the thread sleeps."""
        wchan = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/wchan")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                where = wchan.read_text()
            except OSError:
                return  # no /proc here: type at once
            if "select" in where or "poll" in where:
                return
            time.sleep(0.005)  # polling the kernel's view of another process: there is no event to wait on
        raise AssertionError(f"the chat never waited for input (its main thread sleeps in {where!r})")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.close(self.master)

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*([A-Za-z])")


def render(output: str) -> list[str]:
    """The screen lines ``output`` leaves on a terminal: ``\\b`` and ``\\r`` move the cursor, what is
    written next overwrites, SGR escapes (bold, dim) take no room, ``ESC[K`` erases to the line's end.
    Trailing blanks are dropped, as a user cannot see them."""
    lines: list[list[str]] = [[]]
    column = 0
    i = 0
    while i < len(output):
        char = output[i]
        if char == "\x1b" and (match := _ESCAPE.match(output, i)):
            if match[1] == "K":
                del lines[-1][column:]
            i = match.end()
            continue
        if char == "\n":
            lines.append([])
            column = 0
        elif char == "\r":
            column = 0
        elif char == "\b":
            column = max(column - 1, 0)
        else:
            line = lines[-1]
            line.extend(" " * (column - len(line)))
            if column < len(line):
                line[column] = char
            else:
                line.append(char)
            column += 1
        i += 1
    return ["".join(line).rstrip() for line in lines]
