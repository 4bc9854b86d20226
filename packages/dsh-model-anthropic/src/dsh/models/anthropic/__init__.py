"""Anthropic's Messages API as a dsh model.

The ``anthropic`` entry point of the ``dsh.models`` group is :data:`plugin`; :func:`messages` is
the one mapping of a session's history to Messages API messages.
"""

from ._messages import EMPTY_OUTPUT, messages, tool_definitions
from ._model import DEFAULT_BASE_URL, DEFAULT_MODEL, AnthropicConfig, AnthropicModel, plugin, usage_figures

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "EMPTY_OUTPUT",
    "AnthropicConfig",
    "AnthropicModel",
    "messages",
    "plugin",
    "tool_definitions",
    "usage_figures",
]
