"""The package version (one place: ``rxllm.__version__`` and the ``User-Agent`` header read it)."""

__all__ = ["USER_AGENT", "__version__"]

__version__ = "0.1.0"

USER_AGENT = f"rxllm/{__version__}"
"""What every request carries as ``User-Agent`` unless the caller sets one."""
