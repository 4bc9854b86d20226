"""The errors of dsh-paths (standard library only, so not ``DshError``s).

PermissionError (builtin)
└── UntrustedPathError   .path: owned by another user or writable by group or others
OSError (builtin)
└── NotRegularFileError  .path: a FIFO, device, socket or directory where a file is read
"""

from __future__ import annotations

import os


class UntrustedPathError(PermissionError):
    """A path dsh would trust is owned by another user or writable by group or others.

    The message is one line naming the path and the command that fixes it.
    """

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        super().__init__(message)
        self.path = os.fspath(path)
        """The path at fault."""

    def __str__(self) -> str:
        return str(self.args[0])


class NotRegularFileError(OSError):
    """A path dsh reads is a FIFO, device, socket or directory, not a regular file.

    ``str()`` is one sentence naming the path; ``strerror`` the short reason (``"it is a FIFO"``)
    for callers that name the path themselves.
    """

    def __init__(self, path: str | os.PathLike[str], message: str, reason: str) -> None:
        super().__init__(message)
        self.path = os.fspath(path)
        """The path at fault."""
        self.strerror = reason
        self.filename = self.path

    def __str__(self) -> str:
        return str(self.args[0])
