"""Errors of the exec layer, each with its subject as attributes.

DshError (dsh.core)
├── ChannelError (ValueError)   .key, .channel: an environment entry passed through the wrong channel
└── ExecError                   .path, .shell: a child could not be started or its output not spilled

BaseException (builtin)
├── Interrupted (``_interrupt``)  .reason, .result: the run was interrupted by a signal; like ``CancelledError``
└── asyncio.CancelledError
    └── CommandCancelled (``dsh.bash.aio``)  .result: a cancellation that stopped a started command, with its output
"""

from __future__ import annotations

from typing import Literal

from dsh.core import DshError


class ChannelError(DshError, ValueError):
    """An environment entry was passed through the wrong channel."""

    def __init__(self, message: str, *, key: str, channel: Literal["env", "dsh_env"]) -> None:
        super().__init__(message)
        self.key = key
        """The misplaced key."""
        self.channel = channel
        """The channel it was passed through."""


class ExecError(DshError):
    """A child could not be started (missing working directory or shell), or its output not spilled."""

    def __init__(self, message: str, *, path: str | None = None, shell: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        """The working directory or spill directory at fault, when one is."""
        self.shell = shell
        """The shell that was not found, when that is the fault."""
