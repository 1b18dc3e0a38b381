"""Anthropic Messages (``/v1/messages``) on the rxllm stream contract.

>>> AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-secret")
AnthropicModel(model='claude-sonnet-4-5')
"""

from .._core.public import publish as _publish
from ._anthropic import AnthropicChunkParser, AnthropicRequestMapper
from ._models import ANTHROPIC_BASE_URL as DEFAULT_BASE_URL
from ._models import AnthropicModel

__all__ = ["AnthropicChunkParser", "AnthropicModel", "AnthropicRequestMapper", "DEFAULT_BASE_URL"]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
