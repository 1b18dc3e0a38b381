"""Pydantic instances built from values that are valid already (private): no validator runs.

A hot path that made every value itself (a partial's text, a model response's validated fields,
a session snapshot's stored values) proves nothing by validating them again. :func:`instance`
builds what ``model_construct`` builds when ``values`` names every field: the instance with
``values`` as its ``__dict__`` (in field order), ``fields_set`` as its ``model_fields_set``, no
extra and no private values. :func:`buildable` says whether a class may be built so: it has no
validator (a decorated one, or one in a field's ``Annotated`` metadata), post-init hook, private
attribute or ``extra="allow"`` that building skips. :func:`template` and :func:`from_template`
build ``cls(**values)`` for valid values of some fields, the others at their (immutable) defaults.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, PlainValidator, WrapValidator

__all__ = [
    "buildable",
    "from_template",
    "instance",
    "new",
    "set_dict",
    "set_extra",
    "set_fields_set",
    "set_private",
    "template",
]

M = TypeVar("M", bound=BaseModel)

new = object.__new__
# BaseModel's own slot setters (what ``object.__setattr__`` finds for these names, minus the lookup).
set_dict = BaseModel.__dict__["__dict__"].__set__
set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_IMMUTABLE = (type(None), str, bool, int, float, tuple)  # defaults validation keeps as they are
_FUNCTIONAL = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)  # ``Annotated[x, ...Validator(f)]``


def buildable(cls: type[BaseModel]) -> bool:
    """Whether :func:`instance` gives what validation gives for ``cls``, for valid values of every field."""
    decorators = cls.__pydantic_decorators__
    return not (
        cls.__pydantic_post_init__ is not None
        or cls.__pydantic_root_model__
        or decorators.model_validators
        or decorators.field_validators
        or decorators.validators
        or decorators.root_validators
        or cls.model_config.get("extra") == "allow"
        or cls.__private_attributes__
        or any(isinstance(meta, _FUNCTIONAL) for field in cls.model_fields.values() for meta in field.metadata)
    )


def instance(cls: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """A ``cls`` holding ``values`` (every field, valid, in field order) with ``fields_set`` set."""
    model: M = new(cls)
    set_dict(model, values)
    set_fields_set(model, fields_set)
    set_extra(model, None)
    set_private(model, None)
    return model


def template(cls: type[BaseModel], given: frozenset[str]) -> dict[str, Any] | None:
    """The ``__dict__`` ``cls(**values)`` starts from when ``values`` names the fields ``given`` (their
    values left None, in field order), or None when building so could differ from validating:
    ``cls`` is not :func:`buildable`, or a field outside ``given`` has a default made by a factory
    or a mutable one (validation copies it), or none (required)."""
    if not buildable(cls):
        return None
    built: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if name in given:
            built[name] = None
        elif field.default_factory is not None or not isinstance(field.default, _IMMUTABLE):
            return None
        else:
            built[name] = field.default
    return built


def from_template(cls: type[M], built: dict[str, Any] | None, values: dict[str, Any]) -> M:
    """``cls(**values)`` for ``values`` that are valid already, from ``built``, the :func:`template` of
    ``cls`` for fields including ``values``' keys (``cls(**values)``, validated, when it is None): the
    same ``__dict__`` (in field order) and fields set, nothing validated again."""
    if built is None:
        return cls(**values)
    state = dict(built)
    state.update(values)  # (every key is a field of the template: the order stays its own)
    return instance(cls, state, set(values))
