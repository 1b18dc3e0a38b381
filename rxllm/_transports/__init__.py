"""The transports: the only room that imports the HTTP client library.

``base`` holds the seam a model talks to (the request, limits, cancel scopes, error mapping) and
what both transports share; ``threaded`` runs a thread per open stream, ``asynchronous`` a task
per open stream on an asyncio loop. ``decoding`` bounds decompression; ``coalesce`` merges the
HTTP chunks one network read completed. Imports ``_core`` only (and the HTTP client library, which
no other room imports).
"""
