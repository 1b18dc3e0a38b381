"""The base of rxllm's data types, and genai's leaf types: part kinds and response metadata.

Shared by every model (see :mod:`rxllm._core.types` for the serialisation rules):

* ``_Model``: immutable, built by snake_case name or genai's camelCase alias, ``extra="forbid"``.
* ``Seq[X]``: a sequence field. Type checkers see ``Sequence[X]`` (a list argument is fine);
  pydantic validates it as ``tuple[X, ...]``, so the stored value is a tuple (hashable, immutable).
* ``OpenEnum``: a ``StrEnum`` that, like genai's enums and ADK Java's ``FinishReason``, keeps a value
  it does not know (a newer API's reason, a provider's own error code) as a pseudo-member instead
  of failing: ``FinishReason("REFUSAL") == "REFUSAL"``.

The leaf types mirror ``google.genai.types`` field for field (the round-trip tests in
``tests/test_genai_types.py`` compare against the installed package). A few deep, fast-moving
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
    "GroundingMetadata",
    "GroundingSupport",
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
    "SearchEntryPoint",
    "Segment",
    "Seq",
    "Transcription",
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
