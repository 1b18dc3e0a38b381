"""The base of rxllm's data types, and genai's leaf types: part kinds and response metadata.

Shared by every model (see :mod:`rxllm._core.types` for the serialisation rules):

* ``_Model``: immutable, built by snake_case name or genai's camelCase alias, ``extra="forbid"``.
* ``Seq[X]``: a sequence field. Type checkers see ``Sequence[X]`` (a list argument is fine);
  pydantic validates it as ``tuple[X, ...]``, so the stored value is a tuple (hashable, immutable).
* ``OpenEnum``: a ``StrEnum`` that, like genai's enums and ADK Java's ``FinishReason``, keeps a value
  it does not know (a newer API's reason, a provider's own error code) as a pseudo-member instead
  of failing: ``FinishReason("REFUSAL") == "REFUSAL"``.

The leaf types mirror ``google.genai.types`` field for field (the part kinds, response metadata,
and the request-side leaves: safety settings, the function-calling mode, and Gemini's built-in
tools ``GoogleSearch``, ``ToolCodeExecution`` and ``UrlContext``); the round-trip tests in
``tests/test_genai_types.py`` compare against the installed package. A few deep, fast-moving
genai structures (grounding chunks, content layers, partial arguments, function-response parts)
are kept as JSON (``JsonObject``) rather than typed one by one: they round-trip verbatim.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from types import GenericAlias
from typing import Annotated, Any, ClassVar, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, JsonValue
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema

__all__ = [
    "CodeExecutionResult",
    "ExecutableCode",
    "FileData",
    "FunctionCallingConfigMode",
    "GoogleSearch",
    "GroundingMetadata",
    "GroundingSupport",
    "HarmBlockMethod",
    "HarmBlockThreshold",
    "HarmCategory",
    "JsonObject",
    "Language",
    "LiveServerGoAway",
    "LiveServerSessionResumptionUpdate",
    "LiveServerToolCallCancellation",
    "LogprobsResult",
    "LogprobsResultCandidate",
    "LogprobsResultTopCandidates",
    "OpenEnum",
    "Outcome",
    "RetrievalMetadata",
    "SafetySetting",
    "SearchEntryPoint",
    "Segment",
    "Seq",
    "ToolCodeExecution",
    "Transcription",
    "UrlContext",
    "VideoMetadata",
]

T = TypeVar("T")

JsonObject = dict[str, JsonValue]
"""A JSON object kept verbatim (keys as they came)."""


class _AsTuple:
    """Pydantic metadata: validate and describe a ``Sequence[X]`` as ``tuple[X, ...]``."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        (item,) = get_args(source)
        return handler.generate_schema(GenericAlias(tuple, (item, ...)))


Seq = Annotated[Sequence[T], _AsTuple()]
"""``Sequence[T]`` for type checkers (lists accepted), stored as a tuple."""


class _Model(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        ser_json_bytes="base64",
        val_json_bytes="base64",
    )

    def __repr_args__(self) -> Any:
        """The repr shows the fields that are set: ``Part(text='hi')``, not twenty ``None`` s."""
        return [(name, value) for name, value in super().__repr_args__() if value is not None]


class OpenEnum(enum.StrEnum):
    """A ``StrEnum`` that keeps unknown values as pseudo-members (as genai's enums do)."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member


class Language(OpenEnum):
    """The language of :class:`ExecutableCode`, genai's values."""

    LANGUAGE_UNSPECIFIED = "LANGUAGE_UNSPECIFIED"
    PYTHON = "PYTHON"


class Outcome(OpenEnum):
    """The outcome of a :class:`CodeExecutionResult`, genai's values."""

    OUTCOME_UNSPECIFIED = "OUTCOME_UNSPECIFIED"
    OUTCOME_OK = "OUTCOME_OK"
    OUTCOME_FAILED = "OUTCOME_FAILED"
    OUTCOME_DEADLINE_EXCEEDED = "OUTCOME_DEADLINE_EXCEEDED"


class FileData(_Model):
    """A file referenced by URI (genai's ``FileData``)."""

    display_name: str | None = None
    file_uri: str | None = None
    mime_type: str | None = None


class ExecutableCode(_Model):
    """Code the model generated for a code-execution tool to run."""

    code: str | None = None
    language: Language | None = None
    id: str | None = None


class CodeExecutionResult(_Model):
    """The result of running :class:`ExecutableCode`."""

    outcome: Outcome | None = None
    output: str | None = None
    id: str | None = None


class VideoMetadata(_Model):
    """Which span of a video part to use; offsets are genai's duration strings (``"1.5s"``)."""

    start_offset: str | None = None
    end_offset: str | None = None
    fps: float | None = None
    content_layers: Seq[str] | None = None


class Transcription(_Model):
    """Audio transcription of a live turn's input or output."""

    text: str | None = None
    finished: bool | None = None
    language_code: str | None = None
    speaker_label: str | None = None
    words: Seq[JsonObject] | None = None
    start_offset: str | None = None
    end_offset: str | None = None


class LiveServerGoAway(_Model):
    """A live server's notice that it will end the session soon (genai's ``LiveServerGoAway``):
    ``time_left`` is a duration as the server wrote it (``"10s"``)."""

    time_left: str | None = None


class LiveServerSessionResumptionUpdate(_Model):
    """A live server's new session-resumption handle (genai's ``LiveServerSessionResumptionUpdate``):
    connect again with ``new_handle`` to continue the session where it stood."""

    new_handle: str | None = None
    resumable: bool | None = None
    last_consumed_client_message_index: int | None = None


class LiveServerToolCallCancellation(_Model):
    """A live server's cancellation of function calls it asked for (genai's
    ``LiveServerToolCallCancellation``): the ids of the calls whose answers it no longer wants."""

    ids: Seq[str] | None = None


class LogprobsResultCandidate(_Model):
    """One token and its log probability."""

    log_probability: float | None = None
    token: str | None = None
    token_id: int | None = None


class LogprobsResultTopCandidates(_Model):
    """The top candidates at one decoding step."""

    candidates: Seq[LogprobsResultCandidate] | None = None


class LogprobsResult(_Model):
    """Log probabilities of the chosen tokens and the top candidates per step."""

    chosen_candidates: Seq[LogprobsResultCandidate] | None = None
    top_candidates: Seq[LogprobsResultTopCandidates] | None = None
    log_probability_sum: float | None = None


class Segment(_Model):
    """A span of the answer a grounding support refers to."""

    start_index: int | None = None
    end_index: int | None = None
    part_index: int | None = None
    text: str | None = None


class GroundingSupport(_Model):
    """Which grounding chunks support a segment of the answer."""

    confidence_scores: Seq[float] | None = None
    grounding_chunk_indices: Seq[int] | None = None
    segment: Segment | None = None
    rendered_parts: Seq[int] | None = None


class SearchEntryPoint(_Model):
    """The search suggestion to show with a grounded answer."""

    rendered_content: str | None = None
    sdk_blob: bytes | None = None


class RetrievalMetadata(_Model):
    """Metadata of grounding retrieval."""

    google_search_dynamic_retrieval_score: float | None = None


class GroundingMetadata(_Model):
    """Where a grounded answer came from (genai's ``GroundingMetadata``).

    ``grounding_chunks`` (web, retrieved-context, maps and image sources) and
    ``source_flagging_uris`` are kept as JSON objects.
    """

    image_search_queries: Seq[str] | None = None
    grounding_chunks: Seq[JsonObject] | None = None
    grounding_supports: Seq[GroundingSupport] | None = None
    retrieval_metadata: RetrievalMetadata | None = None
    search_entry_point: SearchEntryPoint | None = None
    web_search_queries: Seq[str] | None = None
    google_maps_widget_context_token: str | None = None
    retrieval_queries: Seq[str] | None = None
    source_flagging_uris: Seq[JsonObject] | None = None


# --------------------------------------------------------------------------------------------
# request-side leaves


class FunctionCallingConfigMode(OpenEnum):
    """How the model may call functions (genai's ``FunctionCallingConfigMode``).

    ``AUTO``: it decides (text or calls); ``ANY``: it must call a function; ``NONE``: it must not;
    ``VALIDATED``: it decides, and the calls it makes are constrained to the declared schemas
    (Gemini only). ``MODE_UNSPECIFIED`` means the provider's default, as leaving the mode unset.
    """

    MODE_UNSPECIFIED = "MODE_UNSPECIFIED"
    AUTO = "AUTO"
    ANY = "ANY"
    NONE = "NONE"
    VALIDATED = "VALIDATED"


class HarmCategory(OpenEnum):
    """A category of harmful content a :class:`SafetySetting` applies to, genai's values."""

    HARM_CATEGORY_UNSPECIFIED = "HARM_CATEGORY_UNSPECIFIED"
    HARM_CATEGORY_HARASSMENT = "HARM_CATEGORY_HARASSMENT"
    HARM_CATEGORY_HATE_SPEECH = "HARM_CATEGORY_HATE_SPEECH"
    HARM_CATEGORY_SEXUALLY_EXPLICIT = "HARM_CATEGORY_SEXUALLY_EXPLICIT"
    HARM_CATEGORY_DANGEROUS_CONTENT = "HARM_CATEGORY_DANGEROUS_CONTENT"
    HARM_CATEGORY_CIVIC_INTEGRITY = "HARM_CATEGORY_CIVIC_INTEGRITY"
    HARM_CATEGORY_JAILBREAK = "HARM_CATEGORY_JAILBREAK"
    HARM_CATEGORY_IMAGE_HATE = "HARM_CATEGORY_IMAGE_HATE"
    HARM_CATEGORY_IMAGE_DANGEROUS_CONTENT = "HARM_CATEGORY_IMAGE_DANGEROUS_CONTENT"
    HARM_CATEGORY_IMAGE_HARASSMENT = "HARM_CATEGORY_IMAGE_HARASSMENT"
    HARM_CATEGORY_IMAGE_SEXUALLY_EXPLICIT = "HARM_CATEGORY_IMAGE_SEXUALLY_EXPLICIT"


class HarmBlockThreshold(OpenEnum):
    """From which probability of harm a response is blocked, genai's values."""

    HARM_BLOCK_THRESHOLD_UNSPECIFIED = "HARM_BLOCK_THRESHOLD_UNSPECIFIED"
    BLOCK_LOW_AND_ABOVE = "BLOCK_LOW_AND_ABOVE"
    BLOCK_MEDIUM_AND_ABOVE = "BLOCK_MEDIUM_AND_ABOVE"
    BLOCK_ONLY_HIGH = "BLOCK_ONLY_HIGH"
    BLOCK_NONE = "BLOCK_NONE"
    OFF = "OFF"


class HarmBlockMethod(OpenEnum):
    """Whether a threshold applies to the probability or the severity score, genai's values."""

    HARM_BLOCK_METHOD_UNSPECIFIED = "HARM_BLOCK_METHOD_UNSPECIFIED"
    SEVERITY = "SEVERITY"
    PROBABILITY = "PROBABILITY"


class SafetySetting(_Model):
    """One category's blocking threshold (genai's ``SafetySetting``); only Gemini applies them.

    >>> SafetySetting(category="HARM_CATEGORY_HARASSMENT", threshold="BLOCK_ONLY_HIGH").model_dump_json(
    ...     by_alias=True, exclude_none=True)
    '{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_ONLY_HIGH"}'
    """

    category: HarmCategory | None = None
    method: HarmBlockMethod | None = None
    threshold: HarmBlockThreshold | None = None


class GoogleSearch(_Model):
    """Gemini's built-in Google Search grounding tool (genai's ``GoogleSearch``).

    ``search_types`` (web and image search) and ``time_range_filter`` (an interval of RFC 3339
    times) are kept as JSON objects; ``blocking_confidence`` is genai's ``PhishBlockThreshold``
    value as a string.
    """

    search_types: JsonObject | None = None
    blocking_confidence: str | None = None
    exclude_domains: Seq[str] | None = None
    time_range_filter: JsonObject | None = None


class ToolCodeExecution(_Model):
    """Gemini's built-in code execution tool (genai's ``ToolCodeExecution``; it has no settings)."""


class UrlContext(_Model):
    """Gemini's built-in URL context tool (genai's ``UrlContext``; it has no settings)."""
