"""Loading the apps of an agents directory, as ADK's ``AgentLoader`` does.

An agents directory holds one app per entry: a package ``APP/`` (its ``__init__.py`` or its
``agent.py`` module defines ``root_agent``) or a module ``APP.py`` defining ``root_agent``. An app
may also define ``app``: an object with a ``root_agent`` and a ``plugins`` sequence (ADK Python's
``App``), or a module-level ``plugins`` list; those plugins are given to the app's runner.

Each app is imported under a private module name (``rxllm_web_apps.APP``), so apps never clash with
each other or with installed packages, and relative imports inside a package work. A failed import
is kept as the app's load error (shown by ``/list-apps?detailed=true`` and answered by every route
of that app) instead of stopping the server. With ``reload=True`` an app whose files changed since
it was loaded is imported afresh on its next use.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import re
import sys
import threading
import traceback
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..agents import BaseAgent, BasePlugin

__all__ = ["AgentLoader", "AppLoadError", "LoadedApp", "check_id", "check_app_name"]

_MODULE_ROOT = "rxllm_web_apps"
_APP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,255}$")


def check_app_name(name: str) -> bool:
    """Whether ``name`` can name an app: a Python identifier (no path separator, no dot)."""
    return bool(_APP_NAME.match(name))


def check_id(value: str) -> bool:
    """Whether ``value`` can be a user or session id: letters, digits and ``_ . : @ + = -``, not
    starting with a dot or a dash (so never ``.``, ``..`` or a path), at most 256 characters."""
    return bool(_ID.match(value)) and ".." not in value


class AppLoadError(Exception):
    """An app that could not be loaded; ``str()`` is the summary shown to clients."""


@dataclass
class LoadedApp:
    """One loaded app: its root agent, its plugins and the files it was loaded from."""

    name: str
    root_agent: BaseAgent
    plugins: tuple[BasePlugin, ...] = ()
    files: dict[Path, float] = field(default_factory=dict)


@dataclass
class _Entry:
    app: LoadedApp | None = None
    error: str | None = None
    files: dict[Path, float] = field(default_factory=dict)


class AgentLoader:
    """The apps of an agents directory, loaded on first use and cached (thread-safe).

    Args:
        agents_dir: the directory of apps.
        reload: re-import an app when one of its ``.py`` files changed (modification time) since
            it was loaded.
    """

    def __init__(self, agents_dir: str | Path, *, reload: bool = False) -> None:
        self.agents_dir: Path = Path(agents_dir).resolve()
        self.reload: bool = reload
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}

    def list_apps(self) -> list[str]:
        """The app names, sorted: packages (directories) and modules (``*.py``), hidden and private ones skipped."""
        if not self.agents_dir.is_dir():
            return []
        names: set[str] = set()
        for entry in self.agents_dir.iterdir():
            name = entry.stem if entry.is_file() and entry.suffix == ".py" else entry.name
            is_app = entry.is_dir() or (entry.is_file() and entry.suffix == ".py")
            if is_app and check_app_name(name) and not name.startswith("_"):
                names.add(name)
        return sorted(names)

    def exists(self, name: str) -> bool:
        """Whether the agents directory has an app ``name``."""
        return check_app_name(name) and name in self.list_apps()

    def load(self, name: str) -> LoadedApp:
        """The app (imported now, or cached); :class:`AppLoadError` when it cannot be loaded."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is not None and self.reload and entry.files != self._snapshot(name):
                entry = None
            if entry is None:
                entry = self._import(name)
                self._entries[name] = entry
            if entry.app is None:
                raise AppLoadError(entry.error or f"app {name!r} could not be loaded")
            return entry.app

    def error_of(self, name: str) -> str | None:
        """The app's load error, loading it if needed; None when it loads."""
        try:
            self.load(name)
        except AppLoadError as exc:
            return str(exc)
        return None

    def _source(self, name: str) -> Path:
        package = self.agents_dir / name
        return package if package.is_dir() else self.agents_dir / f"{name}.py"

    def _snapshot(self, name: str) -> dict[Path, float]:
        source = self._source(name)
        paths = sorted(source.rglob("*.py")) if source.is_dir() else [source]
        snapshot: dict[Path, float] = {}
        for path in paths:
            try:
                snapshot[path] = path.stat().st_mtime_ns
            except OSError:
                continue
        return snapshot

    def _import(self, name: str) -> _Entry:
        files = self._snapshot(name)
        try:
            app = self._import_app(name)
        except AppLoadError as exc:
            return _Entry(error=str(exc), files=files)
        except BaseException as exc:  # an app's import may raise anything (SystemExit too): keep serving
            if isinstance(exc, KeyboardInterrupt):
                raise
            last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
            where = f" ({Path(last[0].filename).name}, line {last[0].lineno})" if last else ""
            return _Entry(error=f"app {name!r} failed to load: {type(exc).__name__}: {exc}{where}", files=files)
        app.files = files
        return _Entry(app=app, files=files)

    def _import_app(self, name: str) -> LoadedApp:
        if not check_app_name(name):
            raise AppLoadError(f"{name!r} is not an app name")
        source = self._source(name)
        _forget(f"{_MODULE_ROOT}.{name}")
        _ensure_root()
        module_name = f"{_MODULE_ROOT}.{name}"
        spec: importlib.machinery.ModuleSpec | None
        if source.is_dir():
            init = source / "__init__.py"
            if init.is_file():
                spec = importlib.util.spec_from_file_location(
                    module_name, init, submodule_search_locations=[str(source)]
                )
            else:  # a namespace-style folder: its agent.py is found through the package's path
                spec = importlib.machinery.ModuleSpec(module_name, None, is_package=True)
                spec.submodule_search_locations = [str(source)]
        elif source.is_file():
            spec = importlib.util.spec_from_file_location(module_name, source)
        else:
            raise AppLoadError(f"app {name!r} not found in {self.agents_dir}")
        if spec is None:
            raise AppLoadError(f"app {name!r}: {source} is not an importable module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            if spec.loader is not None:
                spec.loader.exec_module(module)
            found = _find(module)
            if found is None and source.is_dir() and (source / "agent.py").is_file():
                found = _find(importlib.import_module(f"{module_name}.agent"))
        except BaseException:
            _forget(module_name)
            raise
        if found is None:
            raise AppLoadError(f"app {name!r} defines no root_agent (in {source.name}/__init__.py, "
                               f"{source.name}/agent.py or {source.name}.py)")
        root, plugins = found
        if not isinstance(root, BaseAgent):
            raise AppLoadError(f"app {name!r}: root_agent is a {type(root).__name__}, not an agent")
        for plugin in plugins:
            if not isinstance(plugin, BasePlugin):
                raise AppLoadError(f"app {name!r}: plugins must be BasePlugin instances, got {type(plugin).__name__}")
        return LoadedApp(name=name, root_agent=root, plugins=tuple(p for p in plugins if isinstance(p, BasePlugin)))


def _find(module: types.ModuleType) -> tuple[object, Sequence[object]] | None:
    app = getattr(module, "app", None)
    if app is not None and hasattr(app, "root_agent"):
        return app.root_agent, tuple(getattr(app, "plugins", None) or ())
    if hasattr(module, "root_agent"):
        return module.root_agent, tuple(getattr(module, "plugins", None) or ())
    return None


def _ensure_root() -> None:
    if _MODULE_ROOT not in sys.modules:
        root = types.ModuleType(_MODULE_ROOT)
        root.__path__ = []
        sys.modules[_MODULE_ROOT] = root


def _forget(module_name: str) -> None:
    for loaded in [m for m in sys.modules if m == module_name or m.startswith(module_name + ".")]:
        del sys.modules[loaded]
