"""Artifact services (memory and files): versions, the user: namespace, safe names, and tools using them in a run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from reactivex import operators as ops

from rxllm import Blob, Chunk, ConfigurationError, Content, Part, ToolCallFragment
from rxllm.agents import (
    BaseArtifactService,
    FileArtifactService,
    InMemoryArtifactService,
    InMemorySessionService,
    LlmAgent,
    Runner,
    ToolContext,
)
from rxllm.testing import ScriptedLlm, scripted_turn

PNG = Part(inline_data=Blob(mime_type="image/png", data=bytes(range(256)) * 4))


@pytest.fixture(params=["memory", "files"])
def artifacts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseArtifactService]:
    if request.param == "memory":
        yield InMemoryArtifactService()
    else:
        with FileArtifactService(tmp_path / "artifacts") as service:
            yield service


def load(service: BaseArtifactService, name: str, version: int | None = None, session: str = "s1") -> list[Part]:
    return service.load_artifact("app", "u", session, name, version).pipe(ops.to_list()).run()


def test_versions_count_from_zero_and_load_gives_the_latest_or_the_asked_one(artifacts: BaseArtifactService) -> None:
    assert artifacts.save_artifact("app", "u", "s1", "chart.png", PNG).run() == 0
    assert artifacts.save_artifact("app", "u", "s1", "chart.png", Part.from_text("v1")).run() == 1
    assert load(artifacts, "chart.png") == [Part.from_text("v1")]
    assert load(artifacts, "chart.png", 0) == [PNG]
    assert load(artifacts, "chart.png", 7) == []
    assert load(artifacts, "missing.txt") == []
    assert artifacts.list_versions("app", "u", "s1", "chart.png").run() == [0, 1]


def test_session_names_are_per_session_and_user_names_shared_by_the_users_sessions(
    artifacts: BaseArtifactService,
) -> None:
    artifacts.save_artifact("app", "u", "s1", "draft.txt", Part.from_text("mine")).run()
    artifacts.save_artifact("app", "u", "s1", "user:profile.txt", Part.from_text("likes tea")).run()
    assert artifacts.list_artifact_keys("app", "u", "s1").run() == ["draft.txt", "user:profile.txt"]
    assert artifacts.list_artifact_keys("app", "u", "s2").run() == ["user:profile.txt"]
    assert load(artifacts, "user:profile.txt", session="s2") == [Part.from_text("likes tea")]
    assert load(artifacts, "draft.txt", session="s2") == []
    assert artifacts.list_artifact_keys("app", "other", "s1").run() == []
    assert artifacts.list_artifact_keys("other", "u", "s1").run() == []


def test_delete_removes_every_version(artifacts: BaseArtifactService) -> None:
    artifacts.save_artifact("app", "u", "s1", "a.txt", Part.from_text("0")).run()
    artifacts.save_artifact("app", "u", "s1", "a.txt", Part.from_text("1")).run()
    assert artifacts.delete_artifact("app", "u", "s1", "a.txt").pipe(ops.to_list()).run() == []
    assert load(artifacts, "a.txt") == [] and artifacts.list_artifact_keys("app", "u", "s1").run() == []
    artifacts.delete_artifact("app", "u", "s1", "a.txt").pipe(ops.to_list()).run()  # missing: no error
    assert artifacts.save_artifact("app", "u", "s1", "a.txt", Part.from_text("again")).run() == 0


BAD_NAMES = ["", ".", "..", "../etc/passwd", "a/b", "a\\b", "x\x00y", "user:..", "user:", "n" * 300]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_that_are_not_plain_file_names_are_refused(artifacts: BaseArtifactService, name: str) -> None:
    with pytest.raises(ConfigurationError, match="not a plain file name"):
        artifacts.save_artifact("app", "u", "s1", name, Part.from_text("x")).run()
    with pytest.raises(ConfigurationError):
        load(artifacts, name)


def test_ids_cannot_climb_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with FileArtifactService(root) as files:
        files.save_artifact("..", "../..", "../../..", "a.txt", Part.from_text("x")).run()
        files.save_artifact("app", "u", "s", "..hidden", Part.from_text("y")).run()
        assert files.load_artifact("..", "../..", "../../..", "a.txt").run() == Part.from_text("x")
        assert files.list_artifact_keys("app", "u", "s").run() == ["..hidden"]
    written = [Path(dirpath) for dirpath, _, filenames in os.walk(tmp_path) if filenames]
    assert written and all(root in path.parents for path in written)


def test_file_artifacts_survive_a_new_service_and_bad_parts_are_refused(tmp_path: Path) -> None:
    with FileArtifactService(tmp_path) as files:
        files.save_artifact("app", "u", "s1", "chart.png", PNG).run()
        with pytest.raises(ConfigurationError, match="inline_data"):
            files.save_artifact("app", "u", "s1", "call.json", Part.from_function_call("f", {})).run()
    with FileArtifactService(tmp_path) as reopened:
        assert reopened.load_artifact("app", "u", "s1", "chart.png").run() == PNG
        assert reopened.list_artifact_keys("app", "u", "s1").run() == ["chart.png"]


def call(name: str, arguments: str, call_id: str = "c1") -> Chunk:
    return Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, arguments),))


def test_tools_save_list_and_load_artifacts_in_a_run_and_instructions_read_them(
    artifacts: BaseArtifactService,
) -> None:
    def write_report(text: str, tool_context: ToolContext) -> dict[str, int]:
        """Write the report."""
        return {"version": tool_context.save_artifact("report.txt", Part.from_text(text)).run()}

    def read_report(tool_context: ToolContext) -> dict[str, object]:
        """Read the report."""
        names = tool_context.list_artifacts().run()
        found = tool_context.load_artifact("report.txt").pipe(ops.to_list()).run()
        return {"names": names, "text": found[0].text if found else None}

    model = ScriptedLlm(
        [
            scripted_turn(call("write_report", '{"text": "All shipped."}')),
            scripted_turn(call("read_report", "{}", "c2")),
            scripted_turn(Chunk(text_delta="Done.")),
            scripted_turn(Chunk(text_delta="Seen.")),
        ]
    )
    agent = LlmAgent("bot", model, instruction="Report: {artifact.report.txt?}", tools=[write_report, read_report])
    sessions = InMemorySessionService()
    runner = Runner(agent, "app", sessions, artifact_service=artifacts)
    sessions.create_session("app", "u", session_id="s1").run()
    runner.run_async("u", "s1", Content(parts=(Part.from_text("Write it"),))).pipe(ops.to_list()).run()
    history = sessions.get_session("app", "u", "s1").run().events
    responses = [e for e in history if e.function_responses()]
    assert responses[0].function_responses()[0].response == {"version": 0}
    assert responses[0].actions.artifact_delta == {"report.txt": 0}
    assert responses[1].function_responses()[0].response == {"names": ["report.txt"], "text": "All shipped."}
    assert load(artifacts, "report.txt") == [Part.from_text("All shipped.")]

    def instruction(request_index: int) -> str:
        config = model.requests[request_index][0].config
        assert config is not None and config.system_instruction is not None
        text = config.system_instruction.text()
        identity = '\n\nYou are an agent. Your internal name is "bot".'
        assert text.endswith(identity)  # ADK Java's Identity instruction follows the agent's own
        return text.removesuffix(identity)

    assert instruction(0) == "Report: "  # optional, absent before the tool wrote it
    assert instruction(1) == "Report: All shipped."
    runner.run_async("u", "s1", Content(parts=(Part.from_text("Again"),))).pipe(ops.to_list()).run()
    assert instruction(3) == "Report: All shipped."


def test_a_required_artifact_in_an_instruction_fails_the_run_clearly() -> None:
    agent = LlmAgent("bot", ScriptedLlm([scripted_turn(Chunk(text_delta="x"))]), instruction="{artifact.plan.md}")
    sessions = InMemorySessionService()
    sessions.create_session("app", "u", session_id="s1").run()
    runner = Runner(agent, "app", sessions, artifact_service=InMemoryArtifactService())
    with pytest.raises(ConfigurationError, match=r"plan\.md"):
        runner.run_async("u", "s1", Content(parts=(Part.from_text("hi"),))).pipe(ops.to_list()).run()
    no_service = Runner(agent, "app", sessions)
    with pytest.raises(ConfigurationError, match="no artifact service"):
        no_service.run_async("u", "s1", Content(parts=(Part.from_text("hi"),))).pipe(ops.to_list()).run()


def test_concurrent_saves_never_share_a_version(artifacts: BaseArtifactService) -> None:
    import threading

    start = threading.Barrier(4)

    def saver(n: int) -> None:
        start.wait()
        for i in range(10):
            artifacts.save_artifact("app", "u", "s1", "log.txt", Part.from_text(f"{n}:{i}")).run()

    threads = [threading.Thread(target=saver, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert artifacts.list_versions("app", "u", "s1", "log.txt").run() == list(range(40))
    texts = {load(artifacts, "log.txt", v)[0].text for v in range(40)}
    assert texts == {f"{n}:{i}" for n in range(4) for i in range(10)}
