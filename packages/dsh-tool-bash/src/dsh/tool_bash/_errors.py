"""The shell tool's error, with its subject as attributes (the tool turns it into an error result).

DshError (dsh.core)
└── ToolError (dsh.session)   .tool
    └── ArgumentError         .argument: a model-given argument has the wrong type or is blank
"""

from __future__ import annotations

from dsh.session import ToolError


class ArgumentError(ToolError):
    """A model-given argument of a shell tool call has the wrong type or is blank."""

    def __init__(self, message: str, *, argument: str, tool: str | None = None) -> None:
        super().__init__(message, tool=tool)
        self.argument = argument
        """The argument's name."""
