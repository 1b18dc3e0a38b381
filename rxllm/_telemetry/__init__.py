"""OpenTelemetry GenAI spans and metrics, loaded only when ``opentelemetry-api`` is installed.

Imports ``_core`` and ``_rx``.
"""
