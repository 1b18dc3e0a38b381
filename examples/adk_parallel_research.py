"""A ``ParallelAgent`` research fan-out: two researchers at once, then a summarizer.

``SequentialAgent(research, [ParallelAgent(fan_out, [papers, news]), summarizer])``. The two
researchers run concurrently, each in its own branch (``fan_out.papers``, ``fan_out.news``): a
researcher's model never sees the other's findings. The summarizer, after the fork, sees both as
user-role context. The researchers' models here answer on their own threads after a short
pause, so their calls overlap as HTTP calls would.

Run it::

    python examples/adk_parallel_research.py
"""

from __future__ import annotations

import sys
import threading

import reactivex
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

from rxllm import BaseLlm, Chunk, Content, LlmRequest, LlmResponse, Part
from rxllm.agents import Event, InMemoryRunner, LlmAgent, ParallelAgent, SequentialAgent
from rxllm.testing import ScriptedLlm, scripted_turn


class SlowResearcher(BaseLlm):
    """A stand-in model answering on its own thread once both researchers have been asked."""

    def __init__(self, finding: str, both_asked: threading.Barrier) -> None:
        super().__init__(model="researcher")
        self._finding = finding
        self._both_asked = both_asked
        self.requests: list[LlmRequest] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        self.requests.append(llm_request)

        def answer() -> LlmResponse:
            self._both_asked.wait(5)  # both calls are in flight at once
            return LlmResponse(content=Content(role="model", parts=(Part.from_text(self._finding),)))

        return reactivex.from_callable(answer, NewThreadScheduler())


def main() -> int:
    both_asked = threading.Barrier(2)
    papers_model = SlowResearcher("Three papers on pond ecology.", both_asked)
    news_model = SlowResearcher("A pond was restored in Leeds.", both_asked)
    summary_model = ScriptedLlm([scripted_turn(Chunk(text_delta="Ponds: studied and restored."))])
    fan_out = ParallelAgent(
        "fan_out",
        sub_agents=[
            LlmAgent("papers", papers_model, instruction="Find papers."),
            LlmAgent("news", news_model, instruction="Find news."),
        ],
    )
    summarizer = LlmAgent("summarizer", summary_model, instruction="Summarize the findings.")
    runner = InMemoryRunner(SequentialAgent("research", sub_agents=[fan_out, summarizer]), app_name="research")
    runner.session_service.create_session("research", "u1", session_id="s1").run()

    message = Content(role="user", parts=(Part.from_text("What is new about ponds?"),))
    events: list[Event] = runner.run_async("u1", "s1", message).pipe(ops.to_list()).run()
    for event in events:
        print(f"[{event.branch or '-'}] {event.author}: {event.text()}")

    papers_saw = [c.text() for c in papers_model.requests[0].contents]
    news_saw = [c.text() for c in news_model.requests[0].contents]
    summary_saw = [p.text for c in summary_model.requests[0][0].contents for p in c.parts]
    print(f"papers saw: {papers_saw}")
    print(f"news saw: {news_saw}")
    ok = (
        papers_saw == news_saw == ["What is new about ponds?"]
        and "[papers] said: Three papers on pond ecology." in summary_saw
        and "[news] said: A pond was restored in Leeds." in summary_saw
    )
    print("parallel research: OK" if ok else "parallel research: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
