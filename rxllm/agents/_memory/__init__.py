"""Memory (ADK's ``memory/``): the memory services and the ``load_memory`` tool that searches them.

Imports the tool layer and ``_core``/``_rx``. It sits beside ``_artifacts`` and does not import
``_sessions``: it reads sessions and events through the ``SessionLike`` and ``EventLike`` protocols.
"""
