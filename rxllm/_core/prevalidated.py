"""Pydantic instances built from values that are valid already (private): no validator runs.

A hot path that made every value itself (a partial's text, a model response's validated fields,
a session snapshot's stored values) proves nothing by validating them again. :func:`instance`
builds what ``model_construct`` builds when ``values`` names every field: the instance with
``values`` as its ``__dict__`` (in field order), ``fields_set`` as its ``model_fields_set``, no
extra and no private values. :func:`buildable` says whether a class may be built so: it has no
validator (a decorated one, or one in a field's ``Annotated`` metadata), post-init hook, private
attribute or ``extra="allow"`` that building skips.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, PlainValidator, WrapValidator

__all__ = ["buildable", "instance", "new", "set_dict", "set_extra", "set_fields_set", "set_private"]

M = TypeVar("M", bound=BaseModel)

new = object.__new__
# BaseModel's own slot setters (what ``object.__setattr__`` finds for these names, minus the lookup).
set_dict = BaseModel.__dict__["__dict__"].__set__
set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
set_private = BaseModel.__dict__["__pydantic_private__"].__set__
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
