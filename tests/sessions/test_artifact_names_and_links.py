"""FileArtifactService on a real file system: every name of up to 255 UTF-8 bytes fits (however
long percent-encoding would make it), longer ones are refused up front, and symbolic links
planted inside the root are refused for writes, reads, listings and deletes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from reactivex import operators as ops

from rxllm import ConfigurationError, Part, StoreError
from rxllm.agents import FileArtifactService

NAMES = [
    "ü" * 127 + "x",  # 255 bytes, 762 percent-encoded
    "日本語" * 28 + "abc",  # 255 bytes of 3-byte characters
    "%" * 255,  # every byte escaped
    "user:" + "é" * 125,  # a user-scoped name at the limit
    "." + "ß" * 127,  # a leading dot and 2-byte characters
    "plain.txt",
]


@pytest.mark.parametrize("name", NAMES, ids=["umlauts", "cjk", "percent", "user", "dot", "plain"])
def test_every_name_within_255_utf8_bytes_is_saved_listed_loaded_and_deleted(tmp_path: Path, name: str) -> None:
    assert len(name.encode()) <= 255
    session = "s-" + "ö" * 120  # ids longer than a file name once encoded, too
    with FileArtifactService(tmp_path) as files:
        assert files.save_artifact("app", "u", session, name, Part.from_text("v0")).run() == 0
        assert files.save_artifact("app", "u", session, name, Part.from_text("v1")).run() == 1
        assert files.list_artifact_keys("app", "u", session).run() == [name]
        assert files.load_artifact("app", "u", session, name, version=0).run().text == "v0"
        assert files.list_versions("app", "u", session, name).run() == [0, 1]
        files.delete_artifact("app", "u", session, name).pipe(ops.to_list()).run()
        assert files.list_artifact_keys("app", "u", session).run() == []
    with FileArtifactService(tmp_path) as reopened:  # what a restart sees
        assert reopened.save_artifact("app", "u", session, name, Part.from_text("again")).run() == 0
    with FileArtifactService(tmp_path) as reopened:
        assert reopened.list_artifact_keys("app", "u", session).run() == [name]


def test_a_name_past_255_bytes_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with FileArtifactService(tmp_path / "root") as files, pytest.raises(ConfigurationError, match="255 bytes"):
        files.save_artifact("app", "u", "s", "ü" * 128, Part.from_text("x")).run()
    assert not (tmp_path / "root").exists()


def test_short_names_keep_their_percent_encoded_directory(tmp_path: Path) -> None:
    with FileArtifactService(tmp_path) as files:
        files.save_artifact("app", "u", "s", "Bericht ü.txt", Part.from_text("x")).run()
    assert (tmp_path / "app" / "u" / "sessions" / "s" / "Bericht%20%C3%BC.txt" / "0" / "data").is_file()


def _plant(tmp_path: Path, files: FileArtifactService) -> Path:
    files.save_artifact("app", "u", "s", "notes.txt", Part.from_text("mine")).run()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "0").mkdir()
    (outside / "0" / "data").write_text("theirs")
    (outside / "0" / "meta.json").write_text('{"text": true}')
    return outside


@pytest.mark.parametrize("where", ["artifact", "session", "user-scope", "version"])
def test_symlinks_inside_the_root_are_refused(tmp_path: Path, where: str) -> None:
    root = tmp_path / "root"
    with FileArtifactService(root) as files:
        outside = _plant(tmp_path, files)
        sessions = root / "app" / "u" / "sessions"
        if where == "artifact":
            os.symlink(outside, sessions / "s" / "planted.txt")
            name, session = "planted.txt", "s"
        elif where == "session":
            os.symlink(sessions / "s", sessions / "other")
            name, session = "notes.txt", "other"
        elif where == "user-scope":
            os.symlink(outside, root / "app" / "u" / "user")
            name, session = "user:planted.txt", "s"
        else:
            os.symlink(outside / "0", sessions / "s" / "notes.txt" / "1")
            name, session = "notes.txt", "s"
        if where == "version":
            # a linked version is never read; a save claims the next number on the real directory
            assert files.list_versions("app", "u", session, name).run() == [0]
            assert files.load_artifact("app", "u", session, name).run().text == "mine"
            assert files.save_artifact("app", "u", session, name, Part.from_text("new")).run() == 2
            assert (outside / "0" / "data").read_text() == "theirs"
            return
        with pytest.raises(StoreError, match="symbolic link"):
            files.save_artifact("app", "u", session, name, Part.from_text("written through")).run()
        with pytest.raises(StoreError, match="symbolic link"):
            files.load_artifact("app", "u", session, name).run()
        with pytest.raises(StoreError, match="symbolic link"):
            files.delete_artifact("app", "u", session, name).pipe(ops.to_list()).run()
    assert (outside / "0" / "data").read_text() == "theirs"
    assert sorted(p.name for p in outside.iterdir()) == ["0"]


def test_a_root_that_is_itself_a_link_works(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with FileArtifactService(tmp_path / "link") as files:
        assert files.save_artifact("app", "u", "s", "a.txt", Part.from_text("x")).run() == 0
        assert files.load_artifact("app", "u", "s", "a.txt").run().text == "x"
