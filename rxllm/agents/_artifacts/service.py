"""Artifacts: versioned binary files a run keeps, as ADK's ``BaseArtifactService``.

An artifact is a :class:`~rxllm.Part` (``inline_data`` bytes with a MIME type, or text) saved
under a file name, per app, user and session. Every save adds a version (0, 1, 2, ...); loading
without a version gives the latest. A name starting ``user:`` is kept per user, shared by all of
the user's sessions (ADK's namespace). Names are file names, not paths: ``/``, ``\\``, NUL,
``.`` and ``..`` are refused with :class:`~rxllm.ConfigurationError`.

>>> from rxllm import Blob, Part
>>> from rxllm.agents import InMemoryArtifactService
>>> artifacts = InMemoryArtifactService()
>>> report = Part(inline_data=Blob(mime_type="text/csv", data=b"id,status\\nA17,shipped\\n"))
>>> artifacts.save_artifact("shop", "u1", "s1", "orders.csv", report).run()
0
>>> artifacts.save_artifact("shop", "u1", "s1", "user:profile.txt", Part.from_text("likes tea")).run()
0
>>> artifacts.load_artifact("shop", "u1", "s1", "orders.csv").run().inline_data.data
b'id,status\\nA17,shipped\\n'
>>> artifacts.list_artifact_keys("shop", "u1", "other-session").run()
['user:profile.txt']
"""

from __future__ import annotations

import abc
import hashlib
import itertools
import json
import os
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, unquote

import reactivex

from ..._core.errors import ConfigurationError, RxLlmError, StoreError
from ..._core.threads import thread_pool
from ..._core.types import Blob, Part
from ..._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from ..._rx.direct import call_now, emit_now, fail_now, nothing_now
from ..._rx.offthread import call_off_thread

__all__ = ["BaseArtifactService", "FileArtifactService", "InMemoryArtifactService", "artifact_text"]

T = TypeVar("T")

USER_NAMESPACE = "user:"

_MAX_NAME = 255


def check_filename(filename: str) -> str:
    """``filename`` when it is a safe artifact name; otherwise :class:`~rxllm.ConfigurationError`."""
    if not isinstance(filename, str):
        raise ConfigurationError(f"an artifact name must be a string, got {type(filename).__name__}")
    bare = filename.removeprefix(USER_NAMESPACE)
    if (
        not bare
        or bare in (".", "..")
        or any(c in bare for c in "/\\\x00")
        or len(filename.encode("utf-8")) > _MAX_NAME
    ):
        raise ConfigurationError(
            f"artifact name {filename!r} is not a plain file name (no '/', '\\\\', NUL, '.' or '..'; "
            f"at most {_MAX_NAME} bytes)"
        )
    return filename


def check_artifact(artifact: Part) -> Part:
    """``artifact`` when it can be stored: a Part with ``inline_data`` or ``text``."""
    if not isinstance(artifact, Part) or (artifact.inline_data is None and artifact.text is None):
        raise ConfigurationError("an artifact is a Part with inline_data (bytes and a MIME type) or text")
    return artifact


def artifact_text(artifact: Part, filename: str) -> str:
    """An artifact as instruction text: its text, or its bytes when they are UTF-8 text."""
    if artifact.text is not None:
        return artifact.text
    assert artifact.inline_data is not None
    try:
        return artifact.inline_data.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"artifact {filename!r} ({artifact.inline_data.mime_type}) is not UTF-8 text: "
            "it cannot go in an instruction"
        ) from exc


class BaseArtifactService(abc.ABC):
    """Where artifacts live. Every method returns a cold Observable: subscribing does the work.

    ``session_id`` is ignored for ``user:`` names (they belong to the user). Bad names fail with
    :class:`~rxllm.ConfigurationError`; storage failures with :class:`~rxllm.StoreError`.
    """

    @abc.abstractmethod
    def save_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, artifact: Part
    ) -> AwaitableObservable[int]:
        """Save a new version of ``filename``; emit its version number (0 for the first)."""

    @abc.abstractmethod
    def load_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, version: int | None = None
    ) -> MaybeObservable[Part]:
        """Emit the version (the latest when None), or complete empty when there is none (a ``Maybe``)."""

    @abc.abstractmethod
    def list_artifact_keys(self, app_name: str, user_id: str, session_id: str) -> AwaitableObservable[list[str]]:
        """Emit the names visible to the session (its own and the user's ``user:`` names), sorted."""

    @abc.abstractmethod
    def delete_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str
    ) -> MaybeObservable[None]:
        """Delete every version of ``filename``; complete without items. Deleting a missing one is no error."""

    @abc.abstractmethod
    def list_versions(
        self, app_name: str, user_id: str, session_id: str, filename: str
    ) -> AwaitableObservable[list[int]]:
        """Emit the versions of ``filename``, ascending (empty when there is none)."""


def _key(app_name: str, user_id: str, session_id: str, filename: str) -> tuple[str, str, str, str]:
    check_filename(filename)
    return (app_name, user_id, "" if filename.startswith(USER_NAMESPACE) else session_id, filename)


class InMemoryArtifactService(BaseArtifactService):
    """Artifacts in process memory (tests, demos): thread-safe; every method emits synchronously on subscribe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[tuple[str, str, str, str], list[Part]] = {}

    def save_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, artifact: Part
    ) -> AwaitableObservable[int]:
        """Save a version; see :meth:`BaseArtifactService.save_artifact`."""

        def save() -> int:
            key = _key(app_name, user_id, session_id, filename)
            check_artifact(artifact)
            with self._lock:
                versions = self._versions.setdefault(key, [])
                versions.append(artifact)
                return len(versions) - 1

        return awaitable(call_now(save))

    def load_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, version: int | None = None
    ) -> MaybeObservable[Part]:
        """Emit a version or nothing; see :meth:`BaseArtifactService.load_artifact`."""

        def load() -> Part | None:
            key = _key(app_name, user_id, session_id, filename)
            with self._lock:
                versions = self._versions.get(key, [])
                if version is None:
                    return versions[-1] if versions else None
                return versions[version] if 0 <= version < len(versions) else None

        return MaybeObservable(_maybe(load))

    def list_artifact_keys(self, app_name: str, user_id: str, session_id: str) -> AwaitableObservable[list[str]]:
        """Emit the visible names; see :meth:`BaseArtifactService.list_artifact_keys`."""

        def listing() -> list[str]:
            with self._lock:
                return sorted(
                    name
                    for (app, user, session, name), versions in self._versions.items()
                    if versions and app == app_name and user == user_id and session in ("", session_id)
                )

        return awaitable(call_now(listing))

    def delete_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str
    ) -> MaybeObservable[None]:
        """Delete all versions; see :meth:`BaseArtifactService.delete_artifact`."""

        def delete() -> None:
            key = _key(app_name, user_id, session_id, filename)
            with self._lock:
                self._versions.pop(key, None)

        return MaybeObservable(_maybe(delete))  # completes without items

    def list_versions(
        self, app_name: str, user_id: str, session_id: str, filename: str
    ) -> AwaitableObservable[list[int]]:
        """Emit the versions; see :meth:`BaseArtifactService.list_versions`."""

        def listing() -> list[int]:
            key = _key(app_name, user_id, session_id, filename)
            with self._lock:
                return list(range(len(self._versions.get(key, []))))

        return awaitable(call_now(listing))


def _maybe(supplier: Callable[[], T | None]) -> reactivex.Observable[T]:
    """``supplier``'s value, or nothing for None, emitted during subscribe; its exception as ``on_error``."""

    def factory(_: object) -> reactivex.Observable[T]:
        try:
            value = supplier()
        except Exception as exc:
            return fail_now(exc)
        return emit_now(value) if value is not None else nothing_now()

    return reactivex.defer(factory)


_HASHED = "#"
"""Starts a component too long to be percent-encoded in 255 bytes (``quote`` always escapes ``#``)."""

_NAME_FILE = "name"
"""In a hashed artifact directory: the artifact's name, as UTF-8."""

_graveyards = itertools.count()


def _component(value: str) -> str:
    """One path component for an app, user or session id, or an artifact name: never a separator or ``..``.

    Percent-encoded when that fits a file name (255 bytes); otherwise ``#`` and the SHA-256 of the
    value (an artifact directory named so holds the name in a ``name`` file). So every name of
    up to 255 UTF-8 bytes, however many bytes percent-encoding would make of it, fits.
    """
    encoded = quote(value, safe="-_@+=,")
    encoded = "%2E" + encoded[1:] if encoded.startswith(".") else (encoded or "%00")
    if len(encoded) <= _MAX_NAME:
        return encoded
    return _HASHED + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _refuse_links(root: Path, path: Path) -> None:
    """StoreError when any existing component of ``path`` below ``root`` is a symbolic link.

    The root itself may be one (the caller chose it); nothing inside it is followed: a link
    planted there could send writes or reads anywhere on the host.
    """
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise StoreError(f"file artifact store refuses a symbolic link inside its root: {current}")


def _read(path: Path) -> bytes:
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as file:
        return file.read()


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` (never through a link, never over an existing file) holding ``data``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(path, flags, 0o666), "wb") as file:
        file.write(data)


def _entry_name(entry: Path) -> str | None:
    """The artifact name an artifact directory holds, or None while a hashed one has no name file yet."""
    if not entry.name.startswith(_HASHED):
        return unquote(entry.name)
    try:
        return _read(entry / _NAME_FILE).decode("utf-8", "surrogatepass")
    except (FileNotFoundError, OSError):
        return None


def _store_error(exc: Exception) -> RxLlmError:
    return StoreError(f"file artifact store failed: {type(exc).__name__}: {exc}")


class FileArtifactService(BaseArtifactService):
    """Artifacts as files under ``root``: survive restarts; safe for several processes on one host.

    Layout: ``root/<app>/<user>/sessions/<session>/<name>/<version>/`` (``user:`` names under
    ``root/<app>/<user>/user/<name>/...``), each version a directory holding ``data`` (the bytes,
    or the text as UTF-8) and ``meta.json`` (the MIME type, or that it is text). Every path
    component is percent-encoded, so no id or name can climb out of ``root``. A version number is
    claimed by creating its directory (atomic, so concurrent savers never share one) and becomes
    visible only once its ``meta.json`` is in place (written to a temp file, then renamed): a
    crash mid-save leaves no half artifact. A component that percent-encoding would make longer
    than a file name may be is stored as ``#`` and its SHA-256 instead, so every name of up to
    255 UTF-8 bytes fits. Symbolic links inside ``root`` are never followed: a call that meets
    one fails with :class:`~rxllm.StoreError` (``root`` itself may be a link).

    File I/O runs on the service's worker threads; each method returns at once and emits from a
    worker. :meth:`close` (or ``with``) stops the workers.

    >>> import tempfile
    >>> from rxllm import Part
    >>> from rxllm.agents import FileArtifactService
    >>> with FileArtifactService(tempfile.mkdtemp()) as files:
    ...     files.save_artifact("shop", "u1", "s1", "notes.txt", Part.from_text("v0")).run()
    ...     files.save_artifact("shop", "u1", "s1", "notes.txt", Part.from_text("v1")).run()
    ...     files.load_artifact("shop", "u1", "s1", "notes.txt", version=0).run().text
    0
    1
    'v0'
    """

    def __init__(self, root: str | os.PathLike[str], *, max_workers: int = 4) -> None:
        self._root = Path(root)
        self._executor = thread_pool(max_workers, "rxllm-artifacts")

    @property
    def root(self) -> Path:
        """The directory the artifacts live under."""
        return self._root

    def __repr__(self) -> str:
        return f"FileArtifactService({str(self._root)!r})"

    def __enter__(self) -> FileArtifactService:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish queued work and stop the workers (idempotent)."""
        self._executor.shutdown(wait=True)

    def _dir(self, app_name: str, user_id: str, session_id: str, filename: str) -> Path:
        check_filename(filename)
        base = self._root / _component(app_name) / _component(user_id)
        scope = base / "user" if filename.startswith(USER_NAMESPACE) else base / "sessions" / _component(session_id)
        directory = scope / _component(filename)
        _refuse_links(self._root, directory)
        return directory

    @staticmethod
    def _versions(directory: Path) -> list[int]:
        if directory.is_symlink() or not directory.is_dir():
            return []
        return sorted(
            int(entry.name)
            for entry in directory.iterdir()
            if entry.name.isdigit() and not entry.is_symlink() and (entry / "meta.json").is_file()
        )

    def save_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, artifact: Part
    ) -> AwaitableObservable[int]:
        """Save a version; see :meth:`BaseArtifactService.save_artifact`."""

        def save() -> int:
            directory = self._dir(app_name, user_id, session_id, filename)
            check_artifact(artifact)
            directory.mkdir(parents=True, exist_ok=True)
            _refuse_links(self._root, directory)  # a link planted while the directories were made
            if directory.name.startswith(_HASHED) and not (directory / _NAME_FILE).exists():
                temp_name = directory / f".{_NAME_FILE}.{os.getpid()}-{threading.get_ident()}"
                temp_name.unlink(missing_ok=True)
                _write_new(temp_name, filename.encode("utf-8"))
                os.replace(temp_name, directory / _NAME_FILE)
            claimed = [int(e.name) for e in directory.iterdir() if e.name.isdigit()]
            version = max(claimed, default=-1) + 1
            while True:
                try:
                    (directory / str(version)).mkdir()
                    break
                except FileExistsError:  # another saver claimed it first
                    version += 1
            target = directory / str(version)
            meta: dict[str, str | bool]
            if artifact.inline_data is not None:
                data, meta = artifact.inline_data.data, {"mime_type": artifact.inline_data.mime_type}
            else:
                data, meta = (artifact.text or "").encode("utf-8"), {"text": True}
            _write_new(target / "data", data)
            temp = target / "meta.json.tmp"
            _write_new(temp, json.dumps(meta).encode())
            os.replace(temp, target / "meta.json")
            return version

        return call_off_thread(self._executor, save, map_error=_store_error)

    def load_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str, version: int | None = None
    ) -> MaybeObservable[Part]:
        """Emit a version or nothing; see :meth:`BaseArtifactService.load_artifact`."""

        def load() -> Part | None:
            directory = self._dir(app_name, user_id, session_id, filename)
            versions = self._versions(directory)
            chosen = (
                (versions[-1] if versions else None) if version is None else (version if version in versions else None)
            )
            if chosen is None:
                return None
            meta = json.loads(_read(directory / str(chosen) / "meta.json"))
            data = _read(directory / str(chosen) / "data")
            if meta.get("text"):
                return Part(text=data.decode("utf-8"))
            return Part(inline_data=Blob(mime_type=str(meta["mime_type"]), data=data))

        return MaybeObservable(call_off_thread(self._executor, load, map_error=_store_error))

    def list_artifact_keys(self, app_name: str, user_id: str, session_id: str) -> AwaitableObservable[list[str]]:
        """Emit the visible names; see :meth:`BaseArtifactService.list_artifact_keys`."""

        def listing() -> list[str]:
            base = self._root / _component(app_name) / _component(user_id)
            names: list[str] = []
            for scope in (base / "sessions" / _component(session_id), base / "user"):
                _refuse_links(self._root, scope)
                if scope.is_dir():
                    for entry in scope.iterdir():
                        if entry.name.startswith(".") or not self._versions(entry):  # "." : being deleted
                            continue
                        name = _entry_name(entry)
                        if name is not None:
                            names.append(name)
            return sorted(names)

        return call_off_thread(self._executor, listing, map_error=_store_error)

    def delete_artifact(
        self, app_name: str, user_id: str, session_id: str, filename: str
    ) -> MaybeObservable[None]:
        """Delete all versions; see :meth:`BaseArtifactService.delete_artifact`."""

        def delete() -> None:
            directory = self._dir(app_name, user_id, session_id, filename)
            if directory.is_dir():
                graveyard = directory.with_name(f".deleted-{os.getpid()}-{threading.get_ident()}-{next(_graveyards)}")
                os.replace(directory, graveyard)  # atomic: no reader sees a half-deleted artifact
                shutil.rmtree(graveyard, ignore_errors=True)

        return MaybeObservable(call_off_thread(self._executor, delete, map_error=_store_error))

    def list_versions(
        self, app_name: str, user_id: str, session_id: str, filename: str
    ) -> AwaitableObservable[list[int]]:
        """Emit the versions; see :meth:`BaseArtifactService.list_versions`."""

        def listing() -> list[int]:
            return self._versions(self._dir(app_name, user_id, session_id, filename))

        return call_off_thread(self._executor, listing, map_error=_store_error)
