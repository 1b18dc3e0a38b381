"""Ready-made provider models, each a thin request mapper + chunk parser pair on
:class:`~rxllm.SseChatModel`: :mod:`rxllm.providers.openai` (and every OpenAI-compatible
server), :mod:`rxllm.providers.anthropic`, :mod:`rxllm.providers.gemini`.
"""

# Layering (docs/architecture.md): this package imports _core, _models and _transports (the request it
# builds); never the tool layer or a runtime.

from .._core.public import publish as _publish
from ._options import SseModelOptions

__all__ = ["SseModelOptions"]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
