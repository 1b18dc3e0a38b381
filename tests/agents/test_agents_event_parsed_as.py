"""``Event.parsed_as``: pydantic's ``TypeAdapter`` is built once per type (the one the output-schema
resolver uses), and types the cache cannot key (unhashable forms) or pydantic cannot handle behave
as they did before the cache."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
import pytest
from pydantic import BaseModel

from rxllm import Content, Part, StructuredOutputError
from rxllm._core import schema as schema_module
from rxllm._core.schema import output_schema
from rxllm.agents import Event


def answer(text: str) -> Event:
    return Event(author="bot", content=Content(role="model", parts=[Part.from_text(text)]))


@pytest.fixture
def constructions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every ``TypeAdapter`` built through rxllm's schema module, by the type it adapts."""
    built: list[Any] = []
    real = pydantic.TypeAdapter

    def counting(schema: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(schema)
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(schema_module, "TypeAdapter", counting)
    return built


def test_the_adapter_is_built_once_per_type_and_shared_with_the_output_schema(constructions: list[Any]) -> None:
    class Town(BaseModel):  # a type no other test has resolved: the cache starts without it
        name: str

    assert answer('{"name": "Lyon"}').parsed_as(Town) == Town(name="Lyon")
    assert answer('{"name": "Nice"}').parsed_as(Town) == Town(name="Nice")
    assert output_schema(Town).parse('{"name": "Pau"}') == Town(name="Pau")  # the resolver reuses it
    assert constructions == [Town]
    with pytest.raises(StructuredOutputError, match="does not validate as Town"):
        answer('{"name": 3}').parsed_as(Town)
    assert constructions == [Town]


def test_the_cache_is_bounded() -> None:
    assert schema_module._cached_adapter.cache_info().maxsize == 256


def test_an_unhashable_type_form_still_works_built_each_call(constructions: list[Any]) -> None:
    numbers = Annotated[list[int], ["not hashable"]]
    with pytest.raises(TypeError):
        hash(numbers)
    assert answer("[1, 2]").parsed_as(numbers) == [1, 2]
    assert answer("[3]").parsed_as(numbers) == [3]
    assert len(constructions) == 2
    with pytest.raises(StructuredOutputError, match="does not validate"):
        answer('["x"]').parsed_as(numbers)


def test_a_type_pydantic_cannot_handle_fails_as_before_and_is_not_cached(constructions: list[Any]) -> None:
    class Opaque:
        pass

    with pytest.raises(pydantic.PydanticSchemaGenerationError) as direct:
        pydantic.TypeAdapter(Opaque)
    for _ in range(2):
        with pytest.raises(pydantic.PydanticSchemaGenerationError) as caught:
            answer("{}").parsed_as(Opaque)
        assert str(caught.value) == str(direct.value)
    assert constructions == [Opaque, Opaque]  # a failure is not remembered


def test_an_event_with_no_answer_never_builds_an_adapter(constructions: list[Any]) -> None:
    class Village(BaseModel):
        name: str

    with pytest.raises(StructuredOutputError, match="holds no Village"):
        Event(author="bot", partial=True, content=Content(role="model", parts=[Part.from_text("{}")])).parsed_as(
            Village
        )
    assert constructions == []
