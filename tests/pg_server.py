"""A throwaway PostgreSQL server on 127.0.0.1, started from the machine's binaries (tests, benchmarks).

``initdb`` refuses to run as root: as root, the server runs as the ``postgres`` user through
``runuser`` on a temp directory that user owns. Trust authentication, a free port, no TCP from
anywhere but loopback. Start to first query is about half a second; ``stop()`` removes everything.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path


def _binary(name: str) -> str | None:
    """``name`` on PATH, else in the newest Debian/Ubuntu ``/usr/lib/postgresql/<version>/bin``."""
    found = shutil.which(name)
    if found is not None:
        return found
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0
    )
    for directory in reversed(versions):
        if (directory / name).is_file():
            return str(directory / name)
    return None


def _runuser() -> str | None:
    found = shutil.which("runuser")
    return found or next((p for p in ("/usr/sbin/runuser", "/sbin/runuser") if Path(p).is_file()), None)


def postgres_binaries() -> str | None:
    """Why no server can be started here, or None when ``initdb`` and ``pg_ctl`` were found."""
    missing = [name for name in ("initdb", "pg_ctl") if _binary(name) is None]
    if missing:
        return f"no PostgreSQL binaries ({', '.join(missing)} missing): install PostgreSQL (see .ci/run)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if _runuser() is None:
            return "running as root and runuser is missing"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalPostgres:
    """One PostgreSQL server in a temp directory. ``with LocalPostgres() as pg: pg.dsn``.

    Args:
        fsync: keep PostgreSQL's fsync on (benchmarks); off by default for a fast test suite
            (durability against a killed *client* does not depend on it).
    """

    def __init__(self, *, fsync: bool = False) -> None:
        self._fsync = fsync
        self._root: Path | None = None
        self.port = 0

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _cmd(self, program: str, *argv: str) -> list[str]:
        command = [_binary(program) or program, *argv]
        return [_runuser() or "runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def start(self) -> LocalPostgres:
        why = postgres_binaries()
        if why is not None:
            raise RuntimeError(why)
        root = Path(tempfile.mkdtemp(prefix="rxllm-pg-"))
        self._root = root
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(root, user.pw_uid, user.pw_gid)
        data = root / "data"
        subprocess.run(
            self._cmd("initdb", "-D", str(data), "--auth=trust", "-U", "postgres", "-E", "UTF8", "--no-sync"),
            check=True,
            capture_output=True,
        )
        last_error = ""
        for _ in range(5):  # a free port can be taken between probing and binding: try another
            self.port = _free_port()
            options = f"-p {self.port} -h 127.0.0.1 -k {root}" + ("" if self._fsync else " -F")
            done = subprocess.run(
                self._cmd("pg_ctl", "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"),
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                return self
            last_error = done.stdout + done.stderr + (root / "log").read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"PostgreSQL did not start: {last_error}")

    def stop(self) -> None:
        root, self._root = self._root, None
        if root is None:
            return
        if (root / "data" / "postmaster.pid").exists():
            subprocess.run(
                self._cmd("pg_ctl", "-D", str(root / "data"), "-m", "fast", "-w", "stop"), capture_output=True
            )
        shutil.rmtree(root, ignore_errors=True)

    def pids(self) -> list[int]:
        """The postmaster's pid and its children's (the backends and background workers)."""
        assert self._root is not None, "the server is not running"
        postmaster = int((self._root / "data" / "postmaster.pid").read_text().split()[0])
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(entry.name))
        return [postmaster, *children]

    def freeze(self) -> None:
        """SIGSTOP every process of the server: it accepts TCP connections but answers nothing."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):  # a backend that ended since it was listed
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT every process of the server."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):  # a backend that ended since it was listed
                os.kill(pid, signal.SIGCONT)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
