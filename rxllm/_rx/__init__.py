"""Rx plumbing: trampoline-free Observables (``direct``), the asyncio bridge (``aio``), off-thread calls.

Imports only ``_core``.
"""
