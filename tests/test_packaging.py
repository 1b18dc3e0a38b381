"""The wheel and the sdist a platform team gets: built offline from a copy of this tree, then read back.

``python -m build --no-isolation`` builds the sdist, then the wheel *from the unpacked sdist*, so a
file the sdist lacks fails the wheel build too. The build uses the venv's setuptools (the dev
dependency group pins one that writes SPDX ``License-Expression`` metadata); it needs no network.
"""

from __future__ import annotations

import email.message
import email.parser
import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import rxllm

ROOT = Path(__file__).resolve().parents[1]
# What the sdist must carry besides the package: everything the tests read, and `make test`.
SDIST_TREES = ("docs", "examples", "benchmarks", "tests", "rxllm")
SDIST_FILES = ("LICENSE", "README.md", "pyproject.toml", "Makefile", "mkdocs.yml", "MANIFEST.in")
_JUNK = ("__pycache__", ".pyc", ".pyo")
_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "site", "build", "dist", "*.egg-info", "__pycache__", "*.py[cod]", ".*_cache", ".hypothesis",
    "results",
)


def _source_files(tree: str) -> set[str]:
    base = ROOT / tree
    return {
        path.relative_to(ROOT).as_posix()
        for path in base.rglob("*")
        if path.is_file() and not any(part in _JUNK or part.endswith(_JUNK) for part in path.parts)
        and "results" not in path.relative_to(base).parts[:1]
    }


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("build") is None:
        pytest.fail("`build` is in the dev dependency group: make .venv/.installed (pip install --group dev)")
    work = tmp_path_factory.mktemp("packaging")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=_NOT_COPIED)  # the checkout itself is left untouched
    out = work / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, f"python -m build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert "SetuptoolsDeprecationWarning" not in result.stdout + result.stderr, result.stderr
    return out


def _only(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {dist}, found {found}"
    return found[0]


def _metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text)


def _wheel_metadata(dist: Path) -> tuple[email.message.Message, list[str], zipfile.ZipFile]:
    wheel = zipfile.ZipFile(_only(dist, "rxllm-*.whl"))
    info = f"rxllm-{rxllm.__version__}.dist-info"
    return _metadata(wheel.read(f"{info}/METADATA").decode()), wheel.namelist(), wheel


def test_the_license_file_is_the_full_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    for clause in ("1. Definitions.", "2. Grant of Copyright License.", "3. Grant of Patent License.",
                   "9. Accepting Warranty or Additional Liability.", "END OF TERMS AND CONDITIONS",
                   "APPENDIX: How to apply the Apache License to your work."):
        assert clause in text, clause
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_the_wheel_metadata_is_what_a_platform_team_checks(dist: Path) -> None:
    meta, _, _ = _wheel_metadata(dist)
    assert meta["Name"] == "rxllm" and meta["Version"] == rxllm.__version__
    assert meta["Metadata-Version"] >= "2.4"  # the version that carries License-Expression (PEP 639)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["License"] is None, "the legacy License field is superseded by License-Expression"
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")], "PEP 639: no license classifier"
    urls = dict(url.split(", ", 1) for url in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
    assert meta["Requires-Python"] == ">=3.11"
    extras = set(meta.get_all("Provides-Extra") or [])
    assert {"otel", "postgres"} <= extras and "dev" not in extras, extras
    pinned = [req for req in meta.get_all("Requires-Dist") or [] if "==" in req.split(";")[0]]
    assert pinned == [], f"exact pins leak into users' environments: {pinned}"
    assert meta.get_payload().lstrip().startswith("# rxllm"), "the README is the long description"


def test_the_wheel_holds_the_package_the_license_and_the_entry_points(dist: Path) -> None:
    _, names, wheel = _wheel_metadata(dist)
    info = f"rxllm-{rxllm.__version__}.dist-info"
    assert wheel.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    package = {name for name in _source_files("rxllm") if name.endswith(".py")} | {"rxllm/py.typed"}
    assert package <= set(names), sorted(package - set(names))
    assert not [n for n in names if n.startswith(("tests/", "docs/", "examples/", "benchmarks/"))]
    entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert "rxllm = rxllm.cli:main" in entry_points and "rxllm = rxllm.testing.pytest_plugin" in entry_points


def test_the_sdist_carries_everything_its_tests_read(dist: Path) -> None:
    sdist = _only(dist, "rxllm-*.tar.gz")
    prefix = f"rxllm-{rxllm.__version__}/"
    with tarfile.open(sdist) as archive:
        members = {m.name[len(prefix):] for m in archive.getmembers() if m.isfile()}
        pkg_info = archive.extractfile(prefix + "PKG-INFO")
        assert pkg_info is not None
        meta = _metadata(pkg_info.read().decode())
    assert meta["License-Expression"] == "Apache-2.0"
    missing_files = [name for name in SDIST_FILES if name not in members]
    assert not missing_files, missing_files
    for tree in SDIST_TREES:
        missing = sorted(_source_files(tree) - members)
        assert not missing, f"the sdist lacks {len(missing)} files of {tree}/: {missing[:10]}"
    assert any(name.startswith("tests/fixtures/transcripts/") for name in members)
    assert not [name for name in members if "__pycache__" in name or name.endswith((".pyc", ".pyo"))]
    assert (ROOT / "LICENSE").read_bytes() == _read(sdist, prefix + "LICENSE")


def _read(sdist: Path, name: str) -> bytes:
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(name)
        assert member is not None
        return member.read()
