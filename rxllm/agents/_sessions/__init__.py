"""Sessions (ADK's ``sessions/``): ``Event``, state deltas, the session services and their stores.

The lowest room of the agent runtime.
"""
