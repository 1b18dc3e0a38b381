"""The ``telemetry`` fixture: in-memory OpenTelemetry capture for one test (see ``telemetry_support``)."""

from telemetry_support import telemetry

__all__ = ["telemetry"]
