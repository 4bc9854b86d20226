"""Requests, specs and results of the shell execution seam.

They are ``NamedTuple``s, immutable values that cost a tenth of a frozen dataclass to define (each
of which cost every cold ``dsh`` about half a millisecond); change one with ``_replace``.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

from dsh.paths.interrupts import printed_before
from dsh.session import EMPTY_MAPPING

from ._env import Shell


class BashExecRequest(NamedTuple):
    """What a caller asks to run.

    ``env`` is the ordinary channel (in-process plugins such as hooks); ``dsh_env`` is the
    managed snapshot and the only way a ``DSH_*`` variable reaches a child. Both default to an
    empty read-only mapping.
    """

    command: str
    cwd: str | None = None
    timeout: float | None = None
    """Seconds before the whole process group is killed; None waits forever."""
    env: Mapping[str, str] = EMPTY_MAPPING
    dsh_env: Mapping[str, str] = EMPTY_MAPPING
    shell: Shell = "bash"
    stdin: str | None = None
    """Text fed to the child's stdin (hook payloads); None gives it no input."""
    ambient: Mapping[str, str] | None = None
    """The environment the child starts from when it is not this process's (the client's, for a
    ``dsh exec`` served by ``dsh serve``: ``ToolExecution.ambient``); None: ``os.environ``."""
    workspace: str | None = None
    """The session's workspace (its working directory when it began, from its header): what a
    confining executor may make writable. ``cwd`` only moves the command; None: no session."""


class BashExecSpec(NamedTuple):
    """What the executor will spawn: argv, the complete environment, cwd and input."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None
    stdin: bytes | None
    timeout: float | None
    pass_fds: tuple[int, ...] = ()
    """Descriptors the child inherits at their own numbers (a sandbox's filter); the spawn closes
    them in this process once the child has them, or when it could not start."""


class ExecResult(NamedTuple):
    """How a command ended, with its (possibly tail-truncated) output."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration: float = 0.0
    stdout_spill: str | None = None
    """When stdout was truncated to its tail, the file holding all of it."""
    stderr_spill: str | None = None
    status_known: bool = True
    """False when the command's status could not be learned (another ``waitpid()`` in this process
    took it, or the connection to the host running it was lost): ``exit_code`` is then 255 and
    ``stderr`` ends with a line saying why (a hook's verdict cannot be read from it)."""
    sandbox: Mapping[str, Any] | None = None
    """Set by a sandboxing executor: its ``mode``, whether it ``confined`` the command, and ``denied``
    when the sandbox refused a write; None for an executor that has no sandbox."""

    def as_data(self) -> dict[str, Any]:
        """The JSON-able record of this result a transcript keeps (``duration`` left out; ``sandbox`` when
        set; ``status_known`` only when false, so that a record says when its 255 is not the command's)."""
        data: dict[str, Any] = {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "timed_out": self.timed_out,
            "stdout_spill": self.stdout_spill,
            "stderr_spill": self.stderr_spill,
        }
        if not self.status_known:
            data["status_known"] = False
        if self.sandbox is not None:
            data["sandbox"] = dict(self.sandbox)
        return data


def interrupted_result(exc: BaseException) -> ExecResult | None:
    """What the command an interruption ``exc`` stopped had printed, as this executor's result (its
    ``128+N`` status included): :func:`dsh.paths.interrupts.printed_before`, when it is an :class:`ExecResult`."""
    printed = printed_before(exc)
    return printed if isinstance(printed, ExecResult) else None
