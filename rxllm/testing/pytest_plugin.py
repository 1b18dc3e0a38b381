"""rxllm's pytest plugin: fixtures for testing code built on rxllm, and recorded streams as cases.

Installed with rxllm as the ``pytest11`` entry point ``rxllm``, so its fixtures are available in
every test of a project that has rxllm installed (disable with ``-p no:rxllm``). Without the
entry point, load it with ``-p rxllm.testing.pytest_plugin`` or
``pytest_plugins = ["rxllm.testing.pytest_plugin"]`` in a ``conftest.py``.

Fixtures:

``test_scheduler``
    a fresh ``reactivex.testing.TestScheduler`` (the test's virtual clock).
``scripted_llm``
    a factory: ``scripted_llm(turns, model="scripted", scheduler=...)`` makes a
    :class:`~rxllm.testing.ScriptedLlm` that emits on ``test_scheduler`` unless told otherwise.
``stub_server``
    a started loopback :class:`~rxllm.testing.StubServer` (``.url``, ``.enqueue(...)``,
    ``.requests``, ``.connections``), closed after the test.
``sse_recording``
    one recorded SSE body (:class:`~rxllm.testing.SseRecording`), the test running once per file
    of the folder named by its ``sse_recordings`` marker::

        @pytest.mark.sse_recordings("recordings", protocol=None, pattern="**/*.sse")
        def test_replay(sse_recording):
            assert_stream_protocol(sse_recording.replay())

    A relative folder is found beside the test's file; the protocol is told as
    :func:`~rxllm.testing.load_sse_recordings` says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from reactivex import abc as rx_abc
    from reactivex.testing import TestScheduler

    from ._recordings import SseRecording
    from ._scripted import ScriptedLlm, ScriptItem
    from ._stub_server import StubServer

__all__ = ["pytest_configure", "pytest_generate_tests", "scripted_llm", "sse_recording", "stub_server"]

MARKER = "sse_recordings"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``sse_recordings`` marker (so ``--strict-markers`` accepts it)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(folder, protocol=None, pattern='**/*.sse'): run the test once per recorded SSE body "
        "in folder, as the sse_recording fixture (rxllm)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``sse_recording`` from the test's ``sse_recordings`` marker."""
    if "sse_recording" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} uses the sse_recording fixture without an "
            f"@pytest.mark.{MARKER}(folder) marker"
        )
    from ._recordings import load_sse_recordings

    folder = Path(marker.args[0] if marker.args else marker.kwargs["folder"])
    if not folder.is_absolute():
        folder = Path(metafunc.definition.path).parent / folder
    recordings = load_sse_recordings(
        folder, protocol=marker.kwargs.get("protocol"), pattern=marker.kwargs.get("pattern", "**/*.sse")
    )
    metafunc.parametrize("sse_recording", recordings, ids=[r.name for r in recordings], indirect=True)


@pytest.fixture
def sse_recording(request: pytest.FixtureRequest) -> SseRecording:
    """One recorded SSE body; parametrized by the ``sse_recordings`` marker."""
    recording: SseRecording = request.param
    return recording


@pytest.fixture(name="test_scheduler")
def test_scheduler_fixture() -> TestScheduler:
    """A fresh ``TestScheduler``: the test's virtual clock."""
    from reactivex.testing import TestScheduler

    return TestScheduler()


@pytest.fixture
def scripted_llm(test_scheduler: TestScheduler) -> Callable[..., ScriptedLlm]:
    """Make :class:`~rxllm.testing.ScriptedLlm` models on the test's virtual clock."""
    from ._scripted import ScriptedLlm

    def make(
        turns: Iterable[Sequence[ScriptItem]],
        *,
        model: str = "scripted",
        scheduler: rx_abc.SchedulerBase | None = test_scheduler,
    ) -> ScriptedLlm:
        return ScriptedLlm(turns, model=model, scheduler=scheduler)

    return make


@pytest.fixture
def stub_server() -> Iterator[StubServer]:
    """A started loopback :class:`~rxllm.testing.StubServer`, closed after the test."""
    from ._stub_server import StubServer

    with StubServer() as server:
        yield server
