"""Gemini (the Generative Language API) on the rxllm stream contract.

>>> GeminiModel("gemini-2.5-flash", api_key="secret")
GeminiModel(model='gemini-2.5-flash')
"""

from .._core.public import publish as _publish
from ._gemini import GeminiChunkParser, GeminiRequestMapper
from ._models import GEMINI_BASE_URL as DEFAULT_BASE_URL
from ._models import GeminiModel

__all__ = ["DEFAULT_BASE_URL", "GeminiChunkParser", "GeminiModel", "GeminiRequestMapper"]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
