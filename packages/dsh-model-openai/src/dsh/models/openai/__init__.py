"""OpenAI-compatible Chat Completions (OpenAI, DeepSeek, vLLM, Ollama, LM Studio, llama.cpp) as a dsh model.

The ``openai`` entry point of the ``dsh.models`` group is :data:`plugin`; :func:`chat_messages`
is the one mapping of a session's history to Chat Completions messages.
"""

from ._messages import arguments_json, chat_messages
from ._model import DEFAULT_BASE_URL, DEFAULT_MODEL, OpenAIConfig, OpenAIModel, plugin, usage_figures

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "OpenAIConfig",
    "OpenAIModel",
    "arguments_json",
    "chat_messages",
    "plugin",
    "usage_figures",
]
