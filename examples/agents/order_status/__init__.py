"""A package app: ``root_agent`` (in ``agent.py``) answers order questions with a ``get_order`` tool."""

from .agent import root_agent

__all__ = ["root_agent"]
