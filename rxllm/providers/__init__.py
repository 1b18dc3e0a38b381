"""Ready-made provider models, each a thin request mapper + chunk parser pair on
:class:`~rxllm.SseChatModel`: :mod:`rxllm.providers.openai` (and every OpenAI-compatible
server), :mod:`rxllm.providers.anthropic`, :mod:`rxllm.providers.gemini`."""

from ._options import SseModelOptions

__all__ = ["SseModelOptions"]
