"""OpenAI Chat Completions, and every OpenAI-compatible server (Ollama, vLLM, llama.cpp, Groq,
DeepSeek, OpenRouter, ...) through ``base_url``; and the OpenAI Responses API.

>>> OpenAiChatModel("llama3.2", base_url="http://127.0.0.1:11434/v1")  # Ollama: no key needed
OpenAiChatModel(model='llama3.2')
"""

from .._core.public import publish as _publish
from ._models import OPENAI_BASE_URL as DEFAULT_BASE_URL
from ._models import AzureOpenAiChatModel, OpenAiChatModel, OpenAiResponsesModel
from ._openai_chat import OpenAiChatChunkParser, OpenAiChatRequestMapper
from ._openai_realtime import OPENAI_REALTIME_BASE_URL as REALTIME_BASE_URL
from ._openai_realtime import OpenAiRealtimeModel
from ._openai_responses import OpenAiResponsesChunkParser, OpenAiResponsesRequestMapper

__all__ = [
    "AzureOpenAiChatModel",
    "DEFAULT_BASE_URL",
    "OpenAiChatChunkParser",
    "OpenAiChatModel",
    "OpenAiChatRequestMapper",
    "OpenAiRealtimeModel",
    "OpenAiResponsesChunkParser",
    "OpenAiResponsesModel",
    "OpenAiResponsesRequestMapper",
    "REALTIME_BASE_URL",
]

_publish(__name__, globals(), __all__)  # public names show their public path (rxllm._core.public)
