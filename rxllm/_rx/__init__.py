"""Rx plumbing: trampoline-free Observables (``direct``), the asyncio bridge (``aio``, public as
``rxllm.aio``), off-thread calls (``offthread``).

Imports only ``_core``.
"""
