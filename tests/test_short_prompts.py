"""Short prompts, plain ``for`` loops over a stream, and the typed ``parsed_as`` accessor.

"The connection closed" is what the stub server observed (``wait_closed_by_client``).
"""

from __future__ import annotations

import threading

import pytest
import reactivex
from pydantic import BaseModel
from reactivex import operators as ops
from wire import OPENAI

import rxllm
from rxllm import (
    AsyncHttpTransport,
    ConfigurationError,
    Content,
    GenerateContentConfig,
    HttpStatusError,
    HttpTransport,
    LlmRequest,
    LlmResponse,
    Part,
    SseChatModel,
    StructuredOutputError,
)
from rxllm.agents import InMemoryRunner, LlmAgent
from rxllm.testing import Hold, ScriptedLlm, StubResponse, StubServer, scripted_turn

TIMEOUT = 5.0


class City(BaseModel):
    name: str
    population: int


def model_on(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> SseChatModel:
    return OPENAI.model(server.url, transport=transport)


# -- short prompts ----------------------------------------------------------------------------------


def test_a_string_is_one_user_turn_on_the_wire(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("ok"))
    model = model_on(server, transport)
    assert model.generate_content("Say hello", stream=True).run().text() == "ok"
    assert server.requests[0].json()["messages"] == [{"role": "user", "content": "Say hello"}]


def test_a_list_of_content_is_the_conversation(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("fine"))
    model = model_on(server, transport)
    turns = [
        Content(parts=[Part.from_text("Hi")]),  # no role: the user's
        Content(role="model", parts=[Part.from_text("Hello!")]),
        Content(role="user", parts=[Part.from_text("How are you?")]),
    ]
    events = model.stream_events(turns).pipe(ops.to_list()).run()
    assert events[-1].response.text() == "fine"
    assert server.requests[0].json()["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "How are you?"},
    ]


def test_the_request_keyword_takes_a_string_too() -> None:
    model = ScriptedLlm([scripted_turn(rxllm.Chunk(text_delta="a"))])
    model.generate_content(llm_request="Hi", stream=True).run()
    request, stream = model.requests[0]
    assert isinstance(request, LlmRequest) and request.contents[0].text() == "Hi" and stream


def test_a_model_you_wrote_receives_a_request_whatever_the_caller_passed() -> None:
    seen: list[LlmRequest] = []

    class Echo(rxllm.BaseLlm):
        def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
            seen.append(llm_request)
            return reactivex.of(LlmResponse(content=Content(role="model", parts=[Part.from_text("e")])))

    Echo(model="echo").generate_content("one").run()
    Echo(model="echo").stream_events([Content(role="user", parts=[Part.from_text("two")])]).run()
    assert [r.contents[0].text() for r in seen] == ["one", "two"]
    assert all(isinstance(r, LlmRequest) for r in seen)


@pytest.mark.parametrize("prompt", [42, [Content(role="user"), "text"], None])
def test_a_prompt_of_another_type_fails_at_once(prompt: object) -> None:
    model = ScriptedLlm([])
    with pytest.raises(ConfigurationError, match="prompt"):
        model.generate_content(prompt, stream=True)  # type: ignore[arg-type]
    assert model.requests == []


def test_runner_takes_a_string_message() -> None:
    runner = InMemoryRunner(LlmAgent("bot", ScriptedLlm([scripted_turn(rxllm.Chunk(text_delta="Hi!"))])))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    final = runner.run_async("u1", "s1", "Hello").run()
    assert (final.author, final.text()) == ("bot", "Hi!")
    stored = runner.session_service.get_session(runner.app_name, "u1", "s1").run()
    assert [(e.author, e.content.role if e.content else None, e.text()) for e in stored.events] == [
        ("user", "user", "Hello"),
        ("bot", "model", "Hi!"),
    ]
    with pytest.raises(ConfigurationError, match="new_message"):
        runner.run_async("u1", "s1", 7)  # type: ignore[arg-type]


# -- plain for loops ----------------------------------------------------------------------------------


def test_model_stream_yields_the_partials_and_keeps_the_final(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("Hel", "lo!"))
    model = model_on(server, transport)
    stream = model.stream("Hi")
    assert stream.final is None
    printed = "".join(partial.text() for partial in stream)
    assert printed == "Hello!"  # the answer once: the final is not yielded
    assert stream.final is not None and (stream.final.text(), stream.final.partial) == ("Hello!", None)
    assert stream.final.usage_metadata is not None


def test_model_stream_yields_a_final_that_came_without_partials() -> None:
    final_only = LlmResponse(content=Content(role="model", parts=[Part.from_text("whole")]))
    model = ScriptedLlm([[final_only]])
    assert [r.text() for r in model.stream("Hi")] == ["whole"]


def test_model_stream_raises_the_streams_error_from_the_loop(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(StubResponse.json(400, {"error": {"message": "bad request", "type": "invalid_request_error"}}))
    model = model_on(server, transport)
    with pytest.raises(HttpStatusError, match="bad request"):
        for _ in model.stream("Hi"):
            pass


def test_iterate_gives_every_item_of_any_observable() -> None:
    assert list(rxllm.iterate(reactivex.of(1, 2, 3).pipe(ops.map(lambda x: x * 2)))) == [2, 4, 6]
    with pytest.raises(KeyError):
        list(rxllm.iterate(reactivex.throw(KeyError("boom"))))
    with pytest.raises(ConfigurationError):
        rxllm.iterate(reactivex.empty(), max_buffer=0)


def _held(server: StubServer) -> threading.Event:
    release = threading.Event()
    stream = OPENAI.stream("one", "two")
    server.enqueue(StubResponse(body=[*stream[:2], Hold(release, timeout=30.0), *stream[2:]]))
    return release


@pytest.mark.parametrize("how", ["break", "exception", "with", "close", "iterate_break"])
def test_leaving_the_loop_early_closes_the_connection(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport, how: str
) -> None:
    release = _held(server)
    model = model_on(server, transport)
    seen: list[str] = []
    try:
        if how == "break":
            for partial in model.stream("Hi"):
                seen.append(partial.text())
                break
        elif how == "exception":
            with pytest.raises(KeyError):
                for partial in model.stream("Hi"):
                    seen.append(partial.text())
                    raise KeyError("the loop body failed")
        elif how == "with":
            with model.stream("Hi") as stream:
                for partial in stream:
                    seen.append(partial.text())
                    break
                kept = stream  # still referenced: only the end of the block closes it
        elif how == "close":
            stream = model.stream("Hi")
            seen.append(next(stream).text())
            stream.close()
            assert list(stream) == []
        else:
            for response in rxllm.iterate(model.generate_content("Hi", stream=True)):
                seen.append(response.text())
                break
        assert seen == ["one"]
        connection = server.wait_for_connection(1, TIMEOUT)
        assert connection is not None
        assert connection.wait_closed_by_client(TIMEOUT), "the server never saw the connection close"
        if how == "with":
            assert kept.final is None
    finally:
        release.set()


def test_a_threaded_emitter_waits_for_room_in_the_buffer() -> None:
    produced: list[int] = []
    room_needed = threading.Event()

    def subscribe(observer: reactivex.abc.ObserverBase[int], _: object = None) -> reactivex.abc.DisposableBase:
        def emit() -> None:
            for i in range(5):
                produced.append(i)
                if i == 2:
                    room_needed.set()
                observer.on_next(i)
            observer.on_completed()

        threading.Thread(target=emit, daemon=True).start()
        return reactivex.disposable.Disposable()

    items = rxllm.iterate(reactivex.create(subscribe), max_buffer=2)
    first = next(items)
    assert room_needed.wait(TIMEOUT)
    assert first == 0
    assert list(items) == [1, 2, 3, 4]
    assert produced == [0, 1, 2, 3, 4]


# -- typed structured output ------------------------------------------------------------------------


def test_parsed_as_gives_the_validated_object_of_the_final(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response('{"name": "Paris", ', '"population": 2100000}'))
    model = model_on(server, transport)
    stream = model.stream("Biggest city of France?", config=GenerateContentConfig(response_schema=City))
    partials = list(stream)
    assert stream.final is not None
    assert stream.final.parsed_as(City) == City(name="Paris", population=2100000)
    assert partials[-1].parsed == {"name": "Paris", "population": 2100000}  # the JSON so far, not a City
    with pytest.raises(StructuredOutputError, match="partial"):
        partials[-1].parsed_as(City)


def test_parsed_as_names_why_there_is_no_object() -> None:
    invalid = LlmResponse(error_code=rxllm.FinishReason(rxllm.INVALID_STRUCTURED_OUTPUT), error_message="not JSON")
    with pytest.raises(StructuredOutputError, match="INVALID_STRUCTURED_OUTPUT: not JSON") as caught:
        invalid.parsed_as(City)
    assert caught.value.error_code == "INVALID_STRUCTURED_OUTPUT"
    with pytest.raises(StructuredOutputError, match="no parsed object"):
        LlmResponse().parsed_as(City)
    with pytest.raises(StructuredOutputError, match="parsed is a dict"):
        LlmResponse(parsed={"name": "x"}).parsed_as(City)
    assert LlmResponse(parsed=[City(name="a", population=1)]).parsed_as(list[City])[0].name == "a"


def test_an_agents_final_event_gives_its_output_schema_object(server: StubServer) -> None:
    server.enqueue(StubResponse.json(200, OPENAI.complete_body('{"name": "Lyon", "population": 520000}')))
    agent = LlmAgent("geo", OPENAI.model(server.url), output_schema=City, output_key="city")
    runner = InMemoryRunner(agent)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    final = runner.run_async("u1", "s1", "Second city of France?").run()
    assert final.parsed_as(City) == City(name="Lyon", population=520000)
    stored = runner.session_service.get_session(runner.app_name, "u1", "s1").run()
    assert stored.state["city"] == {"name": "Lyon", "population": 520000}  # the same object, as state
    user_event = stored.events[0]
    with pytest.raises(StructuredOutputError, match="validate as City"):
        user_event.parsed_as(City)  # "Second city of France?" is no City
    with pytest.raises(StructuredOutputError, match="partial"):
        final.model_copy(update={"partial": True}).parsed_as(City)


def test_a_response_with_a_parsed_object_keeps_dumping_comparing_and_pickling() -> None:
    import pickle

    response = LlmResponse(parsed=City(name="Oslo", population=700000))
    assert pickle.loads(pickle.dumps(response)) == response
    assert response.model_dump(exclude_none=True) == {"parsed": {"name": "Oslo", "population": 700000}}


def test_the_readmes_first_snippet_prints_the_answer_once(
    server: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    from test_docs import blocks_of

    readme = Path(__file__).resolve().parents[1] / "README.md"
    first = next(block.code for block in blocks_of(readme) if block.info == "python")
    constructor = 'OpenAiChatModel("gpt-4o-mini")'
    assert constructor in first
    server.enqueue(OPENAI.response("Hello", "! ", "Bonjour", " !"))
    local = f'OpenAiChatModel("gpt-4o-mini", base_url={server.url + "/v1"!r}, api_key="sk-test")'
    exec(compile(first.replace(constructor, local), "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "Hello! Bonjour !"  # the partials, once; the final's whole text is not printed again
    assert printed[1].startswith("STOP ")  # the final's finish reason and usage
    assert len(printed) == 2
