"""A child process for the durability tests: appends events to one session, acking each on stdout.

Usage: python appender.py (sqlite|postgres) TARGET WRITER COUNT   (COUNT 0: append until killed)

Event i of writer W carries the state delta {W: i, "W:i": i}: after any crash, a store is
consistent exactly when the writer's stored events are 0..m-1 and its state keys match them.
"""

from __future__ import annotations

import itertools
import sys

from rxllm import Content, Part
from rxllm.agents import BaseSessionService, Event, EventActions, PostgresSessionService, SqliteSessionService


def main() -> None:
    kind, target, writer, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    service: BaseSessionService = (
        SqliteSessionService(target) if kind == "sqlite" else PostgresSessionService(target, max_size=1)
    )
    session = service.get_session("app", "u", "s").run()
    print("ready", flush=True)
    for i in range(count) if count else itertools.count():
        event = Event(
            author=writer,
            content=Content(role="model", parts=(Part.from_text(f"{writer}:{i}"),)),
            actions=EventActions(state_delta={writer: i, f"{writer}:{i}": i}),
        )
        service.append_event(session, event).run()
        print(i, flush=True)
    service.close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
