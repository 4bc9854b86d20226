"""The Gemini CLI hook dialect: Gemini CLI's ``settings.json`` hooks run unchanged under dsh.

Found through the ``dsh.hook_dialects`` entry point ``gemini``; see :mod:`._dialect` and the README.
"""

from ._dialect import (
    CWD,
    DIALECT,
    IDENTITY_VARIABLES,
    PLANS_DIR,
    PROJECT_DIR,
    SESSION_ID,
    SHELL_TOOL,
    GeminiCli,
)

__all__ = ["CWD", "DIALECT", "IDENTITY_VARIABLES", "PLANS_DIR", "PROJECT_DIR", "SESSION_ID", "SHELL_TOOL", "GeminiCli"]
