"""The recorded transcripts in ``tests/fixtures/transcripts`` are complete: the folder holds exactly
what its ``manifest.json`` lists, at the recorded sizes, so no transcript test can shrink silently."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import TRANSCRIPTS_DIR, load_manifest

ROOT = Path(__file__).resolve().parents[1]

# What the manifest holds: a refresh of the fixtures that adds or drops streams must change this on purpose.
EXPECTED_PER_PROTOCOL = {"openai-chat": 25, "anthropic": 5, "gemini": 5, "openai-responses": 3}
KEPT_DOCUMENTS = {".gitattributes", "README.md", "SOURCES.md", "manifest.json"}


def _manifest() -> list[dict[str, object]]:
    entries: list[dict[str, object]] = json.loads((TRANSCRIPTS_DIR / "manifest.json").read_text(encoding="utf-8"))
    return entries


def test_the_fixture_folder_is_inside_the_repository() -> None:
    assert TRANSCRIPTS_DIR.is_relative_to(ROOT)
    assert TRANSCRIPTS_DIR == ROOT / "tests" / "fixtures" / "transcripts"


def test_the_folder_holds_every_listed_transcript_and_nothing_unlisted() -> None:
    listed = {str(entry[key]) for entry in _manifest() for key in ("file", "expected")}
    present = {p.relative_to(TRANSCRIPTS_DIR).as_posix() for p in TRANSCRIPTS_DIR.rglob("*") if p.is_file()}
    assert present - KEPT_DOCUMENTS == listed
    assert present >= KEPT_DOCUMENTS


def test_every_recording_has_its_recorded_size() -> None:
    for entry in _manifest():
        assert (TRANSCRIPTS_DIR / str(entry["file"])).stat().st_size == entry["bytes"], entry["file"]


def test_the_manifest_holds_the_expected_number_per_protocol() -> None:
    assert collections.Counter(str(entry["protocol"]) for entry in _manifest()) == EXPECTED_PER_PROTOCOL
    assert len(load_manifest()) == sum(EXPECTED_PER_PROTOCOL.values())


def test_a_missing_fixture_folder_fails_collection_loudly(tmp_path: Path) -> None:
    # The transcript tests are collected against an empty fixture folder: collection must error, not skip.
    tests = tmp_path / "tests"
    (tests / "fixtures" / "transcripts").mkdir(parents=True)
    for name in ("transcripts.py", "test_sse_decoder.py", "test_transcript_replay.py"):
        (tests / name).write_bytes((ROOT / "tests" / name).read_bytes())
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tests)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(ROOT)])}
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, check=False)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == pytest.ExitCode.INTERRUPTED, result.stdout  # collection errors stop the run
    assert "MissingTranscriptsError: no transcript manifest" in result.stdout
    assert "2 errors" in summary and "skipped" not in summary and "passed" not in summary, summary
