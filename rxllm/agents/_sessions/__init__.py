"""Sessions (ADK's ``sessions/``): ``Event``, state deltas, the session services and their stores
(in memory, SQLite, PostgreSQL) and the per-session run lanes.

The lowest room of the agent runtime: imports the tool layer (``State``, ids) and ``_core``/``_rx``,
no other sub-room.
"""
