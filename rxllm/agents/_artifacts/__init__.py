"""Artifacts (ADK's ``artifacts/``): versioned binary parts per session, in memory or in files."""
