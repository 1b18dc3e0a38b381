"""Public names show their public path: ``rxllm.ConfigurationError``, not where it is defined.

Every front door (``rxllm``, ``rxllm.agents``, ``rxllm.service``...) ends with
``publish(__name__, globals(), __all__)`` (a front door that loads names on first use, in its
module ``__getattr__``, publishes each as it loads it), as httpx sets ``__module__`` in its
``__init__``: each
class and function it exports then names the front door as its module, so reprs, tracebacks,
``help()``, the docs and pickles show the path users import from (and a pickle stays loadable when
a private module moves). Constants, type aliases and instances are left alone.

Two things read ``__module__`` to find a class's source module, and are kept working:

- ``typing.get_type_hints`` evaluates a class's string annotations (``from __future__ import
  annotations``) in the namespace of ``sys.modules[cls.__module__]``: the class's own annotations
  are evaluated in its defining module first and stored evaluated.
- ``doctest`` collects a class's examples with the module its ``__module__`` names, and a method's
  only with its class's: the class's methods get the same ``__module__``. The examples of public
  classes and functions therefore run in the front door's namespace, so each imports what it uses.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterable, Mapping

__all__ = ["publish"]


def _is_private(module: str) -> bool:
    return module.startswith("rxllm.") and any(part.startswith("_") for part in module.split(".")[1:])


def _publish_class(cls: type, front_door: str) -> None:
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063  (the class's own dict, changed in place)
    if own:
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception:  # names imported only for type checkers: they never resolved at run time
            hints = {}
        for key in own:
            if key in hints:
                own[key] = hints[key]
    for member in vars(cls).values():
        function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        if inspect.isfunction(function) and function.__module__ == cls.__module__:
            function.__module__ = front_door
    cls.__module__ = front_door


def publish(front_door: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Make ``front_door`` the ``__module__`` of the classes and functions ``names`` of ``namespace``
    that rxllm defines in a private module (``rxllm._core.errors``, ``rxllm.agents._flows.flow``...)."""
    for name in names:
        if name not in namespace:  # a name the front door loads on first use: published then
            continue
        value = namespace[name]
        if inspect.isclass(value) and _is_private(value.__module__):
            _publish_class(value, front_door)
        elif inspect.isfunction(value) and _is_private(value.__module__):
            value.__module__ = front_door
