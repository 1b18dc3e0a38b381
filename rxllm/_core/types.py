"""ADK/genai-shaped data types.

Every model is immutable and is built by snake_case field name (``Part(function_call=...)``);
sequence fields take any sequence (a list is fine) and store a tuple.

Serialisation, in one place:

* ``model_dump()`` / ``model_dump_json()`` use the **field names** (snake_case), as pydantic and
  genai do by default.
* genai's / ADK's camelCase JSON: :meth:`~_Model.to_json` (ADK Java's ``toJson()``: camelCase,
  ``None`` fields dropped) and :meth:`~_Model.from_json`, or ``model_dump(by_alias=True)`` /
  ``model_dump_json(by_alias=True)``.
* Validation accepts both spellings (``model_validate``, ``model_validate_json``), so ADK and
  genai JSON, and genai's own ``model_dump()`` output, validate as they are.
* Bytes (``thought_signature``, ``Blob.data``) travel as base64 in JSON, as in genai.
* Unknown fields are rejected (``extra="forbid"``, as genai does): a misspelt keyword fails at
  once, and JSON with a field rxllm does not know fails loudly, naming it, instead of being
  silently dropped. Provider streams never go through these models (each provider's parser reads
  its wire JSON field by field), so an API adding a field cannot break a stream. Unknown *enum
  values* are kept (see :class:`FinishReason`), as genai keeps them.

>>> from rxllm import Content, Part
>>> c = Content(role="user", parts=[Part.from_text("Where is order A17?")])
>>> c.to_json()
'{"role":"user","parts":[{"text":"Where is order A17?"}]}'
>>> Content.from_json(c.to_json()) == c
True
>>> Part(function_call={"name": "get_order"}).model_dump(exclude_none=True)
{'function_call': {'name': 'get_order', 'args': {}}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeVar, cast, get_origin, is_typeddict

from pydantic import Field, JsonValue, field_validator

from .errors import StructuredOutputError
from .genai_types import (
    CodeExecutionResult,
    ExecutableCode,
    FileData,
    FunctionCallingConfigMode,
    GoogleSearch,
    GroundingMetadata,
    JsonObject,
    LiveServerGoAway,
    LiveServerSessionResumptionUpdate,
    LiveServerToolCallCancellation,
    LogprobsResult,
    OpenEnum,
    SafetySetting,
    Seq,
    ToolCodeExecution,
    Transcription,
    UrlContext,
    VideoMetadata,
)
from .genai_types import _Model as _BaseModel
from .redact import REDACTED, is_secret_name, redact_json
from .schema import SCHEMA_FIELD, ResponseSchema

__all__ = [
    "AnthropicServerTool",
    "Blob",
    "Content",
    "FinishReason",
    "FunctionCall",
    "FunctionCallingConfig",
    "FunctionDeclaration",
    "FunctionResponse",
    "GenerateContentConfig",
    "HttpOptions",
    "LiveConnectConfig",
    "LlmRequest",
    "LlmResponse",
    "OpenAiFileSearch",
    "OpenAiWebSearch",
    "Part",
    "ThinkingConfig",
    "Tool",
    "ToolConfig",
    "UsageMetadata",
]

Role = Literal["user", "model", "system", "tool"] | str

_T = TypeVar("_T")


class _Model(_BaseModel):
    def to_json(self) -> str:
        """genai's / ADK's JSON: camelCase names, ``None`` fields left out (ADK Java's ``toJson()``)."""
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        """Validate genai / ADK JSON (camelCase or snake_case names)."""
        return cls.model_validate_json(text)


class FinishReason(OpenEnum):
    """Why the model stopped, with genai's values.

    Like genai's enums and ADK Java's ``FinishReason``, the type is open: a value it does not list
    (a newer API's reason, a provider's own error code in ``LlmResponse.error_code``) is kept as a
    pseudo-member rather than rejected.

    >>> FinishReason("MAX_TOKENS") is FinishReason.MAX_TOKENS
    True
    >>> FinishReason("rate_limit_exceeded") == "rate_limit_exceeded"
    True
    """

    FINISH_REASON_UNSPECIFIED = "FINISH_REASON_UNSPECIFIED"
    STOP = "STOP"
    MAX_TOKENS = "MAX_TOKENS"
    SAFETY = "SAFETY"
    RECITATION = "RECITATION"
    LANGUAGE = "LANGUAGE"
    OTHER = "OTHER"
    BLOCKLIST = "BLOCKLIST"
    PROHIBITED_CONTENT = "PROHIBITED_CONTENT"
    SPII = "SPII"
    MALFORMED_FUNCTION_CALL = "MALFORMED_FUNCTION_CALL"
    IMAGE_SAFETY = "IMAGE_SAFETY"
    UNEXPECTED_TOOL_CALL = "UNEXPECTED_TOOL_CALL"


class Blob(_Model):
    """Inline bytes with their MIME type."""

    mime_type: str
    data: bytes
    display_name: str | None = None


class FunctionCall(_Model):
    """A tool call the model made. ``args`` is the parsed JSON object."""

    id: str | None = None
    name: str
    args: dict[str, JsonValue] = Field(default_factory=dict)
    partial_args: Seq[JsonObject] | None = None
    will_continue: bool | None = None


class FunctionResponse(_Model):
    """A tool's result, sent back to the model. ``id`` matches the call's id."""

    id: str | None = None
    name: str
    response: dict[str, JsonValue] = Field(default_factory=dict)
    will_continue: bool | None = None
    scheduling: str | None = None
    parts: Seq[JsonObject] | None = None


class Part(_Model):
    """One piece of a :class:`Content`, with every kind genai's ``Part`` has.

    Text, thought text, a function call or response, inline bytes, a file by URI, code the model
    wrote and its execution result, and media metadata. A part with ``thought=True`` holds
    reasoning text. A thought part with a ``thought_signature`` and no text is a provider's
    opaque (redacted) reasoning block. The newest genai kinds (``tool_call``, ``tool_response``,
    ``media_resolution``, the ``*_metadata`` of documents, spreadsheets, speech and audio) are kept
    as JSON objects.
    """

    text: str | None = None
    thought: bool | None = None
    thought_signature: bytes | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    executable_code: ExecutableCode | None = None
    code_execution_result: CodeExecutionResult | None = None
    video_metadata: VideoMetadata | None = None
    media_resolution: JsonObject | None = None
    tool_call: JsonObject | None = None
    tool_response: JsonObject | None = None
    part_metadata: JsonObject | None = None
    audio_transcription: Transcription | None = None
    media_processing: str | None = None
    speech_metadata: JsonObject | None = None
    document_metadata: JsonObject | None = None
    spreadsheet_metadata: JsonObject | None = None
    audio_metadata: JsonObject | None = None

    @classmethod
    def from_text(cls, text: str) -> Part:
        """A text part.

        >>> Part.from_text("hi").text
        'hi'
        """
        return cls(text=text)

    @classmethod
    def from_function_call(cls, name: str, args: Mapping[str, Any], id: str | None = None) -> Part:
        """A function-call part.

        >>> Part.from_function_call("get_order", {"order_id": "A17"}).function_call.args
        {'order_id': 'A17'}
        """
        return cls(function_call=FunctionCall(id=id, name=name, args=dict(args)))

    @classmethod
    def from_function_response(cls, name: str, response: Mapping[str, Any], id: str | None = None) -> Part:
        """A function-response part, the result of the call with the same ``id``."""
        return cls(function_response=FunctionResponse(id=id, name=name, response=dict(response)))


class Content(_Model):
    """A turn's content: a role (``"user"`` or ``"model"``) and its parts."""

    role: Role | None = None
    parts: Seq[Part] = ()

    def text(self) -> str:
        """The concatenated answer text of the parts (thought parts excluded)."""
        return "".join(p.text for p in self.parts if p.text is not None and not p.thought)

    def thought_text(self) -> str:
        """The concatenated text of the thought parts."""
        return "".join(p.text for p in self.parts if p.text is not None and p.thought)

    def function_calls(self) -> list[FunctionCall]:
        """The parts' function calls, in order."""
        return [call for p in self.parts if (call := p.function_call) is not None]  # (one read of each)

    def function_responses(self) -> list[FunctionResponse]:
        """The parts' function responses, in order."""
        return [response for p in self.parts if (response := p.function_response) is not None]  # (one read of each)


class FunctionDeclaration(_Model):
    """A tool the model may call. ``parameters`` is a JSON Schema object."""

    name: str
    description: str | None = None
    parameters: dict[str, JsonValue] | None = None


class OpenAiWebSearch(_Model):
    """The OpenAI Responses API's built-in ``web_search`` tool (an rxllm type; genai has none).

    ``allowed_domains`` goes in the tool's ``filters``; ``user_location`` is the API's
    approximate-location object, sent as given (``{"type": "approximate", "country": "DE"}``).

    >>> Tool(openai_web_search=OpenAiWebSearch(search_context_size="low")).openai_web_search.search_context_size
    'low'
    """

    search_context_size: Literal["low", "medium", "high"] | None = None
    allowed_domains: Seq[str] | None = None
    user_location: JsonObject | None = None


class OpenAiFileSearch(_Model):
    """The OpenAI Responses API's built-in ``file_search`` tool over vector stores (an rxllm type).

    ``filters`` and ``ranking_options`` are the API's objects, sent as given.
    """

    vector_store_ids: Seq[str]
    max_num_results: int | None = None
    filters: JsonObject | None = None
    ranking_options: JsonObject | None = None


class AnthropicServerTool(_Model):
    """One of Anthropic's server tools, run by Anthropic inside the request (an rxllm type).

    ``type`` is the tool's versioned type (``"web_search_20250305"``, ``"web_fetch_20250910"``,
    ``"code_execution_20250825"``) and ``name`` the name the API requires for it. The common
    settings are typed; ``settings`` holds any other member of the tool object, sent as given
    (``{"citations": {"enabled": True}}``). The class methods build the current versions.

    >>> AnthropicServerTool.web_search(max_uses=3)
    AnthropicServerTool(type='web_search_20250305', name='web_search', max_uses=3)
    """

    type: str
    name: str
    max_uses: int | None = None
    allowed_domains: Seq[str] | None = None
    blocked_domains: Seq[str] | None = None
    user_location: JsonObject | None = None
    settings: JsonObject | None = None

    @classmethod
    def web_search(
        cls,
        *,
        max_uses: int | None = None,
        allowed_domains: Sequence[str] | None = None,
        blocked_domains: Sequence[str] | None = None,
        user_location: Mapping[str, JsonValue] | None = None,
    ) -> AnthropicServerTool:
        """Anthropic's web search tool (``web_search_20250305``)."""
        return cls(
            type="web_search_20250305",
            name="web_search",
            max_uses=max_uses,
            allowed_domains=allowed_domains,
            blocked_domains=blocked_domains,
            user_location=dict(user_location) if user_location is not None else None,
        )

    @classmethod
    def web_fetch(
        cls,
        *,
        max_uses: int | None = None,
        allowed_domains: Sequence[str] | None = None,
        blocked_domains: Sequence[str] | None = None,
    ) -> AnthropicServerTool:
        """Anthropic's web fetch tool (``web_fetch_20250910``; it needs the ``anthropic-beta``
        header ``web-fetch-2025-09-10``, passed as an extra header)."""
        return cls(
            type="web_fetch_20250910",
            name="web_fetch",
            max_uses=max_uses,
            allowed_domains=allowed_domains,
            blocked_domains=blocked_domains,
        )

    @classmethod
    def code_execution(cls) -> AnthropicServerTool:
        """Anthropic's code execution tool (``code_execution_20250825``; it needs the
        ``anthropic-beta`` header ``code-execution-2025-08-25``, passed as an extra header)."""
        return cls(type="code_execution_20250825", name="code_execution")


class Tool(_Model):
    """What a model may use: function declarations, and built-in tools the provider runs itself.

    The function declarations and Gemini's built-in tools (``google_search``,
    ``code_execution``, ``url_context``) are genai's ``Tool`` fields. ``openai_web_search``,
    ``openai_file_search`` (OpenAI Responses) and ``anthropic_server_tool`` (Anthropic) are
    rxllm's own. A built-in tool is sent only to its own provider; any other provider refuses
    the request with a :class:`~rxllm.ConfigurationError` naming the tool, rather than dropping
    it. One ``Tool`` may hold several of them, as in genai.

    >>> from rxllm import GoogleSearch
    >>> Tool(google_search=GoogleSearch()).to_json()
    '{"functionDeclarations":[],"googleSearch":{}}'
    """

    function_declarations: Seq[FunctionDeclaration] = ()
    google_search: GoogleSearch | None = None
    code_execution: ToolCodeExecution | None = None
    url_context: UrlContext | None = None
    openai_web_search: OpenAiWebSearch | None = None
    openai_file_search: OpenAiFileSearch | None = None
    anthropic_server_tool: AnthropicServerTool | None = None


BUILT_IN_TOOLS: dict[str, str] = {
    "google_search": "Gemini",
    "code_execution": "Gemini",
    "url_context": "Gemini",
    "openai_web_search": "OpenAI Responses",
    "openai_file_search": "OpenAI Responses",
    "anthropic_server_tool": "Anthropic",
}
"""Every built-in tool field of :class:`Tool`, and the API that runs it."""


class FunctionCallingConfig(_Model):
    """Which functions the model may or must call (genai's ``FunctionCallingConfig``).

    ``mode`` (:class:`~rxllm.FunctionCallingConfigMode`) and ``allowed_function_names`` are
    genai's; ``stream_function_call_arguments`` too (Gemini on Vertex streams a call's
    arguments; the other APIs always do). ``parallel_tool_calls`` is rxllm's own: ``False``
    asks for at most one call per turn (OpenAI's ``parallel_tool_calls``, Anthropic's
    ``disable_parallel_tool_use``). How each provider expresses these is in
    ``docs/providers/index.md``.

    >>> FunctionCallingConfig(mode="ANY", allowed_function_names=["get_order"]).to_json()
    '{"allowedFunctionNames":["get_order"],"mode":"ANY"}'
    """

    allowed_function_names: Seq[str] | None = None
    mode: FunctionCallingConfigMode | None = None
    stream_function_call_arguments: bool | None = None
    parallel_tool_calls: bool | None = None


class ToolConfig(_Model):
    """Tool options shared by every tool of a request (genai's ``ToolConfig``).

    ``retrieval_config`` (Gemini's location and language for Google Maps and Search grounding)
    is kept as a JSON object; it and ``include_server_side_tool_invocations`` only mean something
    to Gemini.
    """

    retrieval_config: JsonObject | None = None
    function_calling_config: FunctionCallingConfig | None = None
    include_server_side_tool_invocations: bool | None = None


class HttpOptions(_Model):
    """Per-request HTTP additions (the ``headers`` and ``extra_body`` of genai's ``HttpOptions``).

    ``headers`` are sent with the request, each replacing a header of the same name (any letter
    case) that rxllm or the model's ``extra_headers`` would send. ``extra_body`` is merged into
    the request's JSON body after the model's own ``extra_body``: objects merge member by member,
    at any depth; where the body already has a value that is not an object on both sides,
    rxllm's value is kept (and a warning is logged naming the member) unless
    ``extra_body_overrides`` (rxllm's own field) is true, when the extra value replaces it. genai's
    other ``HttpOptions`` fields (base URL, timeout, retry options, clients) are set on the model,
    not per request, so they are not accepted here.

    The repr shows ``***`` for the value of a header or body member whose name is a credential's.

    >>> HttpOptions(headers={"X-Api-Key": "sk-123", "X-Trace": "t1"}, extra_body={"ignore_eos": True})
    HttpOptions(headers={'X-Api-Key': '***', 'X-Trace': 't1'}, extra_body={'ignore_eos': True})
    """

    headers: dict[str, str] | None = None
    extra_body: JsonObject | None = None
    extra_body_overrides: bool | None = None

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            if name == "headers" and value is not None:
                value = {k: (REDACTED if is_secret_name(k) else v) for k, v in value.items()}
            elif name == "extra_body" and value is not None:
                value = redact_json(value)
            yield name, value


class ThinkingConfig(_Model):
    """Reasoning options: whether to return thought text, and a token budget."""

    include_thoughts: bool | None = None
    thinking_budget: int | None = None


class GenerateContentConfig(_Model):
    """Generation options of a request. ``system_instruction`` also accepts a plain string.

    ``response_schema`` asks for structured output: a pydantic model class, a type a pydantic
    ``TypeAdapter`` handles (``list[Order]``, a ``TypedDict``, a dataclass) or a JSON Schema dict.
    Each provider is sent its native structured mode, and the final response carries the
    validated object in ``parsed`` (see ``docs/structured-output.md``). In JSON the field is
    the JSON schema.

    ``tool_config`` forces, restricts or forbids function calls; ``safety_settings`` are Gemini's
    blocking thresholds; ``http_options`` adds headers and body members to this request. Each
    provider maps them to its own API or refuses what it cannot express with a
    :class:`~rxllm.ConfigurationError` (``docs/providers/index.md`` has the table).
    """

    system_instruction: Content | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_output_tokens: int | None = None
    stop_sequences: Seq[str] | None = None
    candidate_count: int | None = None
    seed: int | None = None
    tools: Seq[Tool] | None = None
    response_mime_type: str | None = None
    response_schema: Annotated[ResponseSchema | None, SCHEMA_FIELD] = None
    thinking_config: ThinkingConfig | None = None
    tool_config: ToolConfig | None = None
    safety_settings: Seq[SafetySetting] | None = None
    http_options: HttpOptions | None = None

    if TYPE_CHECKING:  # the signature type checkers see: ``system_instruction`` also takes a str

        def __init__(
            self,
            *,
            system_instruction: Content | str | None = None,
            temperature: float | None = None,
            top_p: float | None = None,
            top_k: int | None = None,
            max_output_tokens: int | None = None,
            stop_sequences: Sequence[str] | None = None,
            candidate_count: int | None = None,
            seed: int | None = None,
            tools: Sequence[Tool] | None = None,
            response_mime_type: str | None = None,
            response_schema: ResponseSchema | None = None,
            thinking_config: ThinkingConfig | None = None,
            tool_config: ToolConfig | None = None,
            safety_settings: Sequence[SafetySetting] | None = None,
            http_options: HttpOptions | None = None,
        ) -> None: ...

    @field_validator("system_instruction", mode="before")
    @classmethod
    def _system_instruction_from_str(cls, value: object) -> object:
        if isinstance(value, str):
            return Content(role="system", parts=(Part(text=value),))
        return value

    def function_declarations(self) -> list[FunctionDeclaration]:
        """Every function declaration of every tool, in order."""
        return [d for tool in self.tools or () for d in tool.function_declarations]


class LiveConnectConfig(_Model):
    """The live-session options of a request (``BaseLlm.connect``), genai's ``LiveConnectConfig``
    names (ADK's ``LlmRequest.liveConnectConfig``).

    ``response_modalities`` is ``["TEXT"]`` or ``["AUDIO"]``. The nested options stay JSON in
    genai's shape, snake_case or camelCase: ``speech_config`` (``{"voice_config":
    {"prebuilt_voice_config": {"voice_name": "Kore"}}}``), ``input_audio_transcription`` /
    ``output_audio_transcription`` (``{}`` turns transcription on), ``session_resumption``
    (``{"handle": "..."}`` resumes a session; ``{}`` asks for handles) and
    ``realtime_input_config`` (voice-activity detection).
    """

    response_modalities: Seq[str] | None = None
    speech_config: JsonObject | None = None
    input_audio_transcription: JsonObject | None = None
    output_audio_transcription: JsonObject | None = None
    session_resumption: JsonObject | None = None
    realtime_input_config: JsonObject | None = None


class LlmRequest(_Model):
    """What a :class:`BaseLlm` is asked: the model name (wins over the model's own when set),
    the conversation so far, the generation config and, for a live session, its options."""

    model: str | None = None
    contents: Seq[Content] = ()
    config: GenerateContentConfig = Field(default_factory=GenerateContentConfig)
    live_connect_config: LiveConnectConfig | None = None

    def append_instructions(self, *instructions: str) -> LlmRequest:
        """This request with ``instructions`` added to the end of its system instruction (ADK Java's
        ``LlmRequest.Builder.appendInstructions``): joined by blank lines, after the current
        instruction's text and a blank line. The instruction stays one text part.

        >>> request = LlmRequest(config=GenerateContentConfig(system_instruction="Be brief."))
        >>> request.append_instructions("Answer in French.", "Sign as Bot.").config.system_instruction.text()
        'Be brief.\\n\\nAnswer in French.\\n\\nSign as Bot.'
        """
        if not instructions:
            return self
        added = "\n\n".join(instructions)
        current = self.config.system_instruction
        text = f"{current.text()}\n\n{added}" if current is not None and current.text() else added
        role = current.role if current is not None and current.role else "system"
        instruction = Content(role=role, parts=(Part(text=text),))
        return self.model_copy(update={"config": self.config.model_copy(update={"system_instruction": instruction})})


class UsageMetadata(_Model):
    """Token counts of one model call, genai's names."""

    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    total_token_count: int | None = None
    thoughts_token_count: int | None = None
    cached_content_token_count: int | None = None


class LlmResponse(_Model):
    """One item of ``generate_content``: ADK Java's ``LlmResponse`` fields.

    ``partial=True`` marks a streamed delta (only new text, no function calls, no usage);
    the final aggregate has ``partial`` unset (``None``). ``error_code`` is a
    :class:`FinishReason` as in ADK Java: a non-STOP finish reason, or an open value for other
    errors (``"REFUSAL"``, a provider's own code), equal to its string.

    ``parsed`` is set when the request had a ``response_schema``: on a partial, the object so far
    as plain JSON data (parsed leniently from the text so far); on the final, the validated
    object (an instance of the class given). ``None`` without a schema.

    ``response_id`` is the provider's id of the response (genai's
    ``GenerateContentResponse.response_id``), set on the final only, when the provider sent one.

    A live session's responses (``BaseLlmConnection.receive()``, ``docs/live.md``) also use
    ``turn_complete`` (the response that ends a model turn), ``interrupted`` (the user barged in),
    ``input_transcription`` / ``output_transcription``, ``go_away`` (the server ends the session
    soon), ``live_session_resumption_update`` (a handle to resume with, as ADK's field of that name)
    and ``tool_call_cancellation`` (function calls the server no longer wants answered).
    """

    content: Content | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    error_code: FinishReason | None = None
    error_message: str | None = None
    finish_reason: FinishReason | None = None
    usage_metadata: UsageMetadata | None = None
    interrupted: bool | None = None
    model_version: str | None = None
    custom_metadata: dict[str, JsonValue] | None = None
    grounding_metadata: GroundingMetadata | None = None
    avg_logprobs: float | None = None
    logprobs_result: LogprobsResult | None = None
    input_transcription: Transcription | None = None
    output_transcription: Transcription | None = None
    go_away: LiveServerGoAway | None = None
    live_session_resumption_update: LiveServerSessionResumptionUpdate | None = None
    tool_call_cancellation: LiveServerToolCallCancellation | None = None
    parsed: Any = None
    response_id: str | None = None

    def is_partial(self) -> bool:
        """``partial`` as a bool (unset counts as final)."""
        return bool(self.partial)

    def text(self) -> str:
        """The answer text (thought parts excluded); ``""`` without content."""
        return self.content.text() if self.content is not None else ""

    def thought_text(self) -> str:
        """The text of the thought parts; ``""`` without content."""
        return self.content.thought_text() if self.content is not None else ""

    def function_calls(self) -> list[FunctionCall]:
        """The function calls of the content, in order."""
        return self.content.function_calls() if self.content is not None else []

    def parsed_as(self, schema: type[_T]) -> _T:
        """``parsed`` as the type the request asked for: ``final.parsed_as(City)`` is a ``City``,
        for a type checker too (``parsed`` itself is ``Any``: a partial's is plain JSON data).

        Args:
            schema: the ``response_schema`` of the request (a class, or a generic alias such as
                ``list[City]``, whose origin is checked).

        Returns:
            The validated object of the final response.

        Raises:
            StructuredOutputError: the response holds no object of that type: a partial, an error
                final (the reply did not validate, ``MAX_TOKENS``, a refusal; ``error_code`` says
                which), a tool call, or a request without a response schema.

        >>> from pydantic import BaseModel
        >>> class City(BaseModel):
        ...     name: str
        >>> LlmResponse(parsed=City(name="Paris")).parsed_as(City).name
        'Paris'
        """
        value = self.parsed
        origin = get_origin(schema) or schema
        expected = dict if is_typeddict(schema) else origin
        if not self.partial and isinstance(expected, type) and isinstance(value, expected):
            return cast(_T, value)
        name = getattr(schema, "__name__", repr(schema))
        if self.partial:
            reason = "it is a partial, whose parsed is the JSON so far; read the final response's"
        elif self.error_code is not None:
            reason = f"the response ended in {self.error_code}: {self.error_message or 'no message'}"
        elif value is None:
            reason = "it has no parsed object (the request had no response_schema, or the turn called tools)"
        else:
            reason = f"its parsed is a {type(value).__name__}"
        raise StructuredOutputError(
            f"the response holds no validated {name}: {reason}",
            error_code=None if self.error_code is None else str(self.error_code),
        )

