"""Eval sets in ADK's format, run against an app, scored with ADK's two default metrics.

An eval set (``NAME.evalset.json``, ADK Python's ``EvalSet``) holds eval cases; each case is a
conversation of invocations: the user's message, the expected final response and the expected
tool calls (``intermediate_data.tool_uses``), with the session's initial state. Field names are
accepted in snake_case (as ADK writes the files) or camelCase.

Each case runs in a fresh session; every invocation's user message goes to the agent and the
actual tool calls and final response are recorded. The scores are ADK's defaults
(``google.adk.cli.cli_eval.DEFAULT_CRITERIA``):

* ``tool_trajectory_avg_score`` (threshold 1.0): per invocation 1 when the tool calls (name and
  arguments, in order) equal the expected ones, else 0; averaged (ADK's ``TrajectoryEvaluator``).
* ``response_match_score`` (threshold 0.8): ROUGE-1 F-measure of the final response's text against
  the expected one, averaged over the invocations that have one (ADK's ``ResponseEvaluator``).
  Words are lower-cased runs of letters and digits; unlike ADK's ``rouge_score`` package no
  stemming is applied, so "shipped" and "ship" differ.

A ``test_config.json`` beside the eval set (``{"criteria": {"response_match_score": 0.6}}``) sets
other thresholds and picks the metrics, as in ADK; a metric rxllm does not compute (ADK's
LLM-judged ``response_evaluation_score``) is reported as not evaluated.
"""

from __future__ import annotations

import collections
import enum
import json
import re
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from .._core.types import Content, FunctionCall
from .._rx import aio
from ..agents import Event, Runner, Session

__all__ = [
    "DEFAULT_CRITERIA",
    "EvalCase",
    "EvalCaseResult",
    "EvalSet",
    "EvalSetResult",
    "EvalStatus",
    "eval_set_ids",
    "load_criteria",
    "load_eval_set",
    "rouge1_f",
    "run_eval_set",
]

TOOL_TRAJECTORY = "tool_trajectory_avg_score"
RESPONSE_MATCH = "response_match_score"
DEFAULT_CRITERIA: dict[str, float] = {TOOL_TRAJECTORY: 1.0, RESPONSE_MATCH: 0.8}
EVAL_SESSION_PREFIX = "___eval___session___"
_SUFFIX = ".evalset.json"


class _EvalModel(BaseModel):
    """Built by snake_case name or camelCase alias (ADK's ``EvalBaseModel``); unknown fields are ignored."""

    model_config: ClassVar[ConfigDict] = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class EvalStatus(enum.IntEnum):
    """ADK's ``EvalStatus`` (serialised as its number)."""

    PASSED = 1
    FAILED = 2
    NOT_EVALUATED = 3


class IntermediateData(_EvalModel):
    """The tool calls (in order) and intermediate responses of one invocation."""

    tool_uses: list[FunctionCall] = Field(default_factory=list)
    intermediate_responses: list[Any] = Field(default_factory=list)


class Invocation(_EvalModel):
    """One turn: the user's message, and the final response and tool calls (expected or actual)."""

    invocation_id: str = ""
    user_content: Content
    final_response: Content | None = None
    intermediate_data: IntermediateData | None = None
    creation_timestamp: float = 0.0


class SessionInput(_EvalModel):
    """How a case's session starts: its user and initial state."""

    app_name: str = ""
    user_id: str = "eval_user"
    state: dict[str, JsonValue] = Field(default_factory=dict)


class EvalCase(_EvalModel):
    """One eval case: a conversation of invocations, run in a fresh session."""

    eval_id: str
    conversation: list[Invocation]
    session_input: SessionInput | None = None
    creation_timestamp: float = 0.0


class EvalSet(_EvalModel):
    """An eval set (ADK's ``EvalSet``): its id and cases."""

    eval_set_id: str
    name: str | None = None
    description: str | None = None
    eval_cases: list[EvalCase]
    creation_timestamp: float = 0.0


class EvalMetricResult(_EvalModel):
    """One metric's score, threshold and status."""

    metric_name: str
    threshold: float
    score: float | None = None
    eval_status: EvalStatus


class EvalMetricResultPerInvocation(_EvalModel):
    """The metrics of one invocation, with the actual and the expected invocation."""

    actual_invocation: Invocation
    expected_invocation: Invocation
    eval_metric_results: list[EvalMetricResult] = Field(default_factory=list)


class EvalCaseResult(_EvalModel):
    """A case's outcome (ADK's ``EvalCaseResult``); ``error`` when a run failed."""

    eval_set_id: str = ""
    eval_id: str = ""
    final_eval_status: EvalStatus
    overall_eval_metric_results: list[EvalMetricResult]
    eval_metric_result_per_invocation: list[EvalMetricResultPerInvocation]
    session_id: str
    user_id: str | None = None
    error: str | None = None


class EvalSetResult(_EvalModel):
    """An eval set's outcome (ADK's ``EvalSetResult``)."""

    eval_set_result_id: str
    eval_set_result_name: str | None = None
    eval_set_id: str
    eval_case_results: list[EvalCaseResult] = Field(default_factory=list)
    creation_timestamp: float = 0.0

    def passed(self) -> bool:
        """Whether no case failed (a case with nothing to evaluate does not fail)."""
        return all(case.final_eval_status != EvalStatus.FAILED for case in self.eval_case_results)


def load_eval_set(path: str | Path) -> EvalSet:
    """The eval set in ``path`` (ADK's JSON); :class:`~rxllm.ConfigurationError` when it is not one."""
    from .._core.errors import ConfigurationError

    file = Path(path)
    try:
        return EvalSet.model_validate_json(file.read_bytes())
    except OSError as exc:
        raise ConfigurationError(f"cannot read the eval set {file}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ConfigurationError(f"{file} is not an ADK eval set: {exc}") from exc


def load_criteria(eval_set_path: str | Path, config_file: str | Path | None = None) -> dict[str, float]:
    """The thresholds: the ``criteria`` of ``config_file``, or of the ``test_config.json`` beside the
    eval set, else ADK's defaults."""
    config = Path(config_file) if config_file is not None else Path(eval_set_path).with_name("test_config.json")
    if config_file is not None and not config.is_file():
        from .._core.errors import ConfigurationError

        raise ConfigurationError(f"no config file {config}")
    if config.is_file():
        data = json.loads(config.read_text())
        criteria = data.get("criteria") if isinstance(data, dict) else None
        if isinstance(criteria, dict):
            return {str(k): float(v) for k, v in criteria.items() if isinstance(v, int | float)}
    return dict(DEFAULT_CRITERIA)


def eval_set_ids(folder: Path) -> list[str]:
    """The eval sets kept in an app's folder (``ID.evalset.json``), sorted."""
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(_SUFFIX)] for p in folder.iterdir() if p.name.endswith(_SUFFIX) and p.is_file())


_WORD = re.compile(r"[a-z0-9]+")


def rouge1_f(reference: str, candidate: str) -> float:
    """ROUGE-1 F-measure: the harmonic mean of unigram precision and recall (clipped counts).

    >>> round(rouge1_f("It shipped Tuesday.", "it shipped on Tuesday"), 3)
    0.857
    """
    ref = collections.Counter(_WORD.findall(reference.lower()))
    cand = collections.Counter(_WORD.findall(candidate.lower()))
    overlap = sum((ref & cand).values())
    if not ref or not cand or not overlap:
        return 0.0
    precision = overlap / sum(cand.values())
    recall = overlap / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


def _calls(calls: list[FunctionCall]) -> list[tuple[str, Any]]:
    return [(call.name, call.args) for call in calls]


def _text(content: Content | None) -> str:
    return content.text() if content is not None else ""


async def _run_invocation(runner: Runner, user_id: str, session_id: str, expected: Invocation,
                          on_event: Callable[[Event], None] | None) -> Invocation:
    events: list[Event] = []
    async with aio.iterate(runner.run_async(user_id, session_id, expected.user_content)) as stream:
        async for event in stream:
            if on_event is not None:
                on_event(event)
            if not event.partial:
                events.append(event)
    tool_uses = [call for event in events for call in event.function_calls()]
    final = next((e.content for e in reversed(events) if e.is_final_response() and e.content is not None), None)
    return Invocation(
        invocation_id=events[-1].invocation_id if events else "",
        user_content=expected.user_content,
        final_response=final,
        intermediate_data=IntermediateData(tool_uses=[c.model_copy(update={"id": None}) for c in tool_uses]),
        creation_timestamp=time.time(),
    )


def _metric(name: str, threshold: float, score: float | None) -> EvalMetricResult:
    if score is None:
        status = EvalStatus.NOT_EVALUATED
    else:
        status = EvalStatus.PASSED if score >= threshold else EvalStatus.FAILED
    return EvalMetricResult(metric_name=name, threshold=threshold, score=score, eval_status=status)


def _score(name: str, actual: Invocation, expected: Invocation) -> float | None:
    if name == TOOL_TRAJECTORY:
        want = _calls(expected.intermediate_data.tool_uses if expected.intermediate_data else [])
        got = _calls(actual.intermediate_data.tool_uses if actual.intermediate_data else [])
        return 1.0 if want == got else 0.0
    if name == RESPONSE_MATCH:
        if expected.final_response is None:
            return None
        return rouge1_f(_text(expected.final_response), _text(actual.final_response))
    return None


async def _run_case(runner: Runner, eval_set_id: str, case: EvalCase, criteria: Mapping[str, float],
                    on_event: Callable[[Event], None] | None) -> EvalCaseResult:
    session_input = case.session_input or SessionInput()
    user_id = session_input.user_id
    session_id = EVAL_SESSION_PREFIX + uuid.uuid4().hex
    service = runner.session_service
    _: Session = await aio.last(service.create_session(runner.app_name, user_id, session_input.state, session_id))
    per_invocation: list[EvalMetricResultPerInvocation] = []
    error: str | None = None
    for expected in case.conversation:
        try:
            actual = await _run_invocation(runner, user_id, session_id, expected, on_event)
        except Exception as exc:  # a failing run fails the case; the other cases still run
            error = f"{type(exc).__name__}: {exc}"
            break
        results = [_metric(name, threshold, _score(name, actual, expected)) for name, threshold in criteria.items()]
        per_invocation.append(EvalMetricResultPerInvocation(
            actual_invocation=actual, expected_invocation=expected, eval_metric_results=results))
    overall: list[EvalMetricResult] = []
    for name, threshold in criteria.items():
        scores = [r.score for inv in per_invocation for r in inv.eval_metric_results
                  if r.metric_name == name and r.score is not None]
        overall.append(_metric(name, threshold, sum(scores) / len(scores) if scores else None))
    if error is not None or any(m.eval_status == EvalStatus.FAILED for m in overall):
        status = EvalStatus.FAILED
    elif any(m.eval_status == EvalStatus.PASSED for m in overall):
        status = EvalStatus.PASSED
    else:
        status = EvalStatus.NOT_EVALUATED
    return EvalCaseResult(
        eval_set_id=eval_set_id, eval_id=case.eval_id, final_eval_status=status,
        overall_eval_metric_results=overall, eval_metric_result_per_invocation=per_invocation,
        session_id=session_id, user_id=user_id, error=error,
    )


async def run_eval_set(
    runner: Runner,
    eval_set: EvalSet,
    *,
    criteria: Mapping[str, float] | None = None,
    eval_ids: Collection[str] | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> EvalSetResult:
    """Run the eval set's cases (those in ``eval_ids``, or all) one after another; score them.

    ``on_event`` is called with each event of the runs as it arrives (the server notes them for
    its trace routes).
    """
    chosen = criteria if criteria is not None else DEFAULT_CRITERIA
    results = [
        await _run_case(runner, eval_set.eval_set_id, case, chosen, on_event)
        for case in eval_set.eval_cases
        if eval_ids is None or case.eval_id in eval_ids
    ]
    now = time.time()
    result_id = f"{runner.app_name}_{eval_set.eval_set_id}_{now:.6f}".replace(".", "_")  # as ADK names them
    return EvalSetResult(eval_set_result_id=result_id, eval_set_result_name=result_id,
                         eval_set_id=eval_set.eval_set_id, eval_case_results=results, creation_timestamp=now)


_EVAL_ID = re.compile(r"^[a-zA-Z0-9_]+$")
_HISTORY = Path(".adk") / "eval_history"
_RESULT_SUFFIX = ".evalset_result.json"


def valid_eval_id(value: str) -> bool:
    """ADK's rule for eval set, eval case and result ids: letters, digits and ``_`` only."""
    return bool(_EVAL_ID.match(value))


def session_to_invocations(session: Session) -> list[Invocation]:
    """A stored session's turns as eval invocations (ADK's ``convert_session_to_eval_invocations``):
    each user message with the tool calls that followed it and the last final response."""
    invocations: list[Invocation] = []
    for event in session.events:
        if event.partial:
            continue
        if event.author == "user" and event.content is not None and not event.function_responses():
            invocations.append(Invocation(
                invocation_id=event.invocation_id, user_content=event.content,
                intermediate_data=IntermediateData(), creation_timestamp=event.timestamp))
            continue
        if not invocations:
            continue
        current = invocations[-1]
        data = current.intermediate_data if current.intermediate_data is not None else IntermediateData()
        calls = event.function_calls()
        if calls:
            data.tool_uses.extend(call.model_copy(update={"id": None}) for call in calls)
        if event.is_final_response() and event.content is not None and event.content.text():
            current.final_response = event.content
        current.intermediate_data = data
    return invocations


class EvalStore:
    """An app's eval sets and results on disk, where ADK keeps them: ``APP/ID.evalset.json`` and
    ``APP/.adk/eval_history/RESULT_ID.evalset_result.json``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _set_path(self, eval_set_id: str) -> Path:
        return self.folder / f"{eval_set_id}{_SUFFIX}"

    def ids(self) -> list[str]:
        return eval_set_ids(self.folder)

    def get(self, eval_set_id: str) -> EvalSet | None:
        """The eval set, or None when there is none of that id."""
        if not valid_eval_id(eval_set_id) or not self._set_path(eval_set_id).is_file():
            return None
        return load_eval_set(self._set_path(eval_set_id))

    def save(self, eval_set: EvalSet) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._set_path(eval_set.eval_set_id).write_text(eval_set.model_dump_json(indent=2, exclude_none=True) + "\n")

    def create(self, eval_set_id: str) -> EvalSet:
        """A new, empty eval set; :class:`ValueError` for an invalid or taken id."""
        if not valid_eval_id(eval_set_id):
            raise ValueError(f"Invalid Eval Set ID. Eval Set ID should have the `{_EVAL_ID.pattern}` format")
        if self._set_path(eval_set_id).exists():
            raise ValueError(f"EvalSet {eval_set_id} already exists for app {self.folder.name}.")
        eval_set = EvalSet(eval_set_id=eval_set_id, name=eval_set_id, eval_cases=[], creation_timestamp=time.time())
        self.save(eval_set)
        return eval_set

    def result_ids(self) -> list[str]:
        history = self.folder / _HISTORY
        if not history.is_dir():
            return []
        return sorted(p.name[: -len(_RESULT_SUFFIX)] for p in history.iterdir() if p.name.endswith(_RESULT_SUFFIX))

    def result(self, result_id: str) -> EvalSetResult | None:
        path = self.folder / _HISTORY / f"{result_id}{_RESULT_SUFFIX}"
        if not valid_eval_id(result_id) or not path.is_file():
            return None
        text = path.read_text()
        data = json.loads(text)
        if isinstance(data, str):  # ADK's older files are JSON-in-a-JSON-string
            data = json.loads(data)
        return EvalSetResult.model_validate(data)

    def save_result(self, result: EvalSetResult) -> Path:
        history = self.folder / _HISTORY
        history.mkdir(parents=True, exist_ok=True)
        path = history / f"{result.eval_set_result_id}{_RESULT_SUFFIX}"
        path.write_text(json.dumps(result.model_dump(mode="json", exclude_none=True), indent=2) + "\n")
        return path


METRICS_INFO: list[dict[str, Any]] = [
    {"metricName": TOOL_TRAJECTORY,
     "description": "1 when an invocation's tool calls (names and arguments, in order) equal the expected ones, "
                    "else 0; averaged over the invocations.",
     "metricValueInfo": {"interval": {"minValue": 0.0, "maxValue": 1.0, "openAtMin": False, "openAtMax": False}}},
    {"metricName": RESPONSE_MATCH,
     "description": "ROUGE-1 F-measure of the final response against the expected one, averaged.",
     "metricValueInfo": {"interval": {"minValue": 0.0, "maxValue": 1.0, "openAtMin": False, "openAtMax": False}}},
]
