"""Artifacts (ADK's ``artifacts/``): versioned binary parts per session, in memory or in files.

Imports ``_core`` and ``_rx`` only; a tool reaches it through the tool layer's ``ArtifactStore``.
"""
