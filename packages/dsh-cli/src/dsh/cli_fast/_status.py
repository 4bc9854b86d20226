"""What ``dsh exec`` reports besides the command's output: its exit statuses and the stderr lines about them.

Standard library only and import-free, so the served client (``_client``) and the in-process verb
share one owner of each status and sentence.
"""

from __future__ import annotations

from dsh.floor import INTERRUPTS as INTERRUPTS  # the one list, for the served client (`_served`)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from collections.abc import Mapping
    from typing import Any

USAGE_EXIT = 2
"""Exit status of every verb when the ``dsh`` command line is invalid (argparse's)."""
TIMEOUT_EXIT = 124
"""Exit status of ``dsh exec`` when a timeout killed the command (the executor reports it so)."""
FAILURE_EXIT = 125
"""Exit status of ``dsh exec`` when dsh itself failed, before the command ran or while recording it."""
BLOCKED_EXIT = 126
"""Exit status of ``dsh exec`` when a hook blocked the command (it never ran)."""
UNKNOWN_EXIT = 255
"""Exit status of ``dsh exec`` when the command may have run but how it ended is unknown (its status was
reaped by someone else, or the server running it died or stopped answering), as OpenSSH's 255."""


class OutputLost(Exception):
    """dsh's own output could not be written (its stdout closed, full or failing): what ran, ran.

    One line on stderr and dsh's failure status follow (125 for ``dsh exec``, whose other statuses
    are the command's; 1 for the other verbs), never a traceback.
    """


def exec_status(result: Mapping[str, Any]) -> int:
    """``dsh exec``'s exit status for its ``--json`` document (in-process or served)."""
    return FAILURE_EXIT if result.get("error") or result.get("exit_code") is None else int(result["exit_code"])


def exec_notices(result: Mapping[str, Any]) -> list[str]:
    """The lines ``dsh exec`` writes to stderr after the command's own output."""
    lines = []
    if result.get("timed_out"):
        after = f" after {result['timeout']:g} s" if isinstance(result.get("timeout"), int | float) else ""
        lines.append(
            f"dsh: the command timed out{after} and its process group was killed; allow longer with --timeout SECONDS"
        )
    if result.get("error"):
        ran = result.get("exit_code") is not None
        lines.append(f"dsh: the command ran, but {result['error']}" if ran else f"dsh: {result['error']}")
    return lines


def interrupted_reason(signal_name: str) -> str:
    """Why ``dsh exec`` or ``dsh run`` stopped on a signal: the one sentence, in-process or served."""
    return (
        f"interrupted by {signal_name}: a running command's process group was killed "
        "and the turn recorded as interrupted"
    )


def interrupted_early(signal_name: str) -> str:
    """Why ``dsh`` stopped on a signal that came before any command started (start-up, boot, opening the session)."""
    return f"interrupted by {signal_name} before any command started: nothing ran"


def interrupted_late(signal_name: str) -> str:
    """What ``dsh exec`` says of a signal that came after the command had ended (its exit status stands)."""
    return (
        f"{signal_name} came after the command had ended: its turn was recorded as it ran, "
        "and dsh exits with the command's status"
    )


def failure_document(error: str, *, status_known: bool = True) -> dict[str, Any]:
    """The ``dsh exec --json`` document when dsh failed before the command ran: every key, nothing ran;
    or, with ``status_known`` false, when a served command may have run but its answer never came.

    The keys are ``ExecOutcome``'s (``dsh.cli._exec``; a test holds the two alike): this folder may
    not import that module.
    """
    return {
        "session_id": None,
        "location": None,
        "exit_code": None,
        "stdout": "",
        "stderr": "",
        "timed_out": False,
        "timeout": None,
        "error": error,
        "interrupted": None,
        "status_known": status_known,
    }
