"""Contract-aware Rx operators for model streams, in reactivex's style: ``source.pipe(op(...))``.

=========================================  ===========================================================
operator                                   what it does
=========================================  ===========================================================
``first_item_timeout(seconds, scheduler)``  :class:`~rxllm.StreamTimeoutError` if no item in time
``idle_timeout(seconds, scheduler)``        :class:`~rxllm.StreamTimeoutError` after a silence
``fallback(factory, when=None)``            another call, only if the first fails before its first item
``hedge(delay, *factories, scheduler)``     start another call after ``delay``; first item wins
``check_contract()``                        :class:`~rxllm.ContractViolationError` the moment the contract breaks
``text_deltas()``                           the answer text as it grows (joins to the final's text)
``final()``                                 the final response only
``partials()``                              the partial responses only
``collect_text()``                          the whole answer text, once
=========================================  ===========================================================

Marble diagrams in the docstrings read left to right in time: ``-`` is a tick, a letter an
item, ``|`` completion, ``#`` a source error, ``X``/``V`` the error the operator emits.

Every operator that stops a source early disposes it before telling the subscriber, on the
thread that decided (a timer's, or the winner's), so the source's connection is closed at once
(never through ``subscribe_on``, which would queue the dispose behind a blocked read). Timers
run on the ``scheduler`` you pass (a ``TestScheduler`` in tests); items are never moved onto it.

>>> from reactivex.testing import TestScheduler
>>> from rxllm import Chunk, LlmRequest
>>> from rxllm.testing import ScriptedLlm, at_times, record_in_virtual_time, scripted_turn
>>> clock = TestScheduler()
>>> llm = ScriptedLlm([at_times(scripted_turn(Chunk(text_delta="Hel"), Chunk(text_delta="lo")), [0.1, 0.3, 0.3])],
...                   scheduler=clock)
>>> stream = lambda: llm.generate_content(LlmRequest(), stream=True).pipe(
...     first_item_timeout(1.0, clock), idle_timeout(0.5, clock), check_contract(), text_deltas())
>>> [(t, n.kind, n.value if n.kind == "N" else None) for t, n in record_in_virtual_time(stream, clock)]
[(0.1, 'N', 'Hel'), (0.3, 'N', 'lo'), (0.3, 'C', None)]
"""

# Layering (docs/architecture.md): this package imports only _core: an operator works on any Observable of LlmResponse.

from .._core.public import publish as _publish
from ._contract import check_contract
from ._fallback import fallback
from ._hedge import hedge
from ._projections import collect_text, final, partials, text_deltas
from ._timeouts import first_item_timeout, idle_timeout

__all__ = [
    "check_contract",
    "collect_text",
    "fallback",
    "final",
    "first_item_timeout",
    "hedge",
    "idle_timeout",
    "partials",
    "text_deltas",
]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
