"""``async`` hooks, detached: they never delay the run that fired them, and may outlive it.

Each one runs in a session and process group of its own (a terminal's Ctrl-C and dsh's exit leave it
alone), its payload read from a private file and its output and exit status written to files beside
it in a private folder under ``<DSH_HOME>/run/async-hooks``. A long-lived runner (``dsh run``, ``dsh
serve``) polls them and reports each as it ends; one still running when its run ends (a one-shot
``dsh exec``) goes on, and its output and status stay in those files.
"""

import contextlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

from dsh.bash import BashExecRequest, LocalExecutor
from dsh.paths import create_private_file, ensure_private_dir

from ._decision import interpret
from ._outcome import HookReport
from ._table import Dialect, HookCommand


class DetachedHook(NamedTuple):
    """One ``async`` hook started detached: where its output and status go, and how to read them."""

    dialect: Dialect
    event: str
    hook: HookCommand
    tool: str | None
    folder: Path
    process: subprocess.Popen[bytes]

    def finished(self) -> bool:
        """Whether it ended (its status was written); reaps the wrapper once it has."""
        self.process.poll()
        return (self.folder / "status").exists()

    def report(self) -> HookReport:
        """What it did, read the way its dialect reads any hook (it never blocks: it is a background hook)."""
        status = int((self.folder / "status").read_text().strip() or 255)
        stdout = _read(self.folder / "stdout")
        stderr = _read(self.folder / "stderr")
        if status == 124:
            error = f"timed out after {self.hook.timeout:g} s and was killed"
            return HookReport(self.dialect, self.event, self.hook.label, status, stdout, stderr, True, error)
        return interpret(self.dialect, self.event, self.hook.label, status, stdout, stderr, self.tool)

    def discard(self) -> None:
        """Remove its files (its report was taken)."""
        for name in ("stdin", "stdout", "stderr", "status"):
            with contextlib.suppress(OSError):
                (self.folder / name).unlink()
        with contextlib.suppress(OSError):
            self.folder.rmdir()


def _read(path: Path, limit: int = 1 << 20) -> str:
    with contextlib.suppress(OSError), path.open("rb") as handle:
        return handle.read(limit).decode(errors="replace")
    return ""


def start_detached(
    executor: LocalExecutor,
    home: Path | None,
    dialect: Dialect,
    event: str,
    hook: HookCommand,
    line: str,
    request: BashExecRequest,
    tool: str | None,
) -> DetachedHook:
    """Start ``hook`` (its command ``line``, run as ``request`` would be) detached, and return at once."""
    base = ensure_private_dir(home / "run" / "async-hooks", "async hook folder") if home is not None else None
    folder = Path(tempfile.mkdtemp(prefix="hook-", dir=base))
    fd = create_private_file(folder / "stdin")
    with os.fdopen(fd, "wb") as handle:
        handle.write((request.stdin or "").encode())
    shell = (
        ["pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", line]
        if request.shell == "pwsh"
        else ["bash", "--noprofile", "--norc", "-c", "--", line]
    )
    # GNU timeout leads a process group of its own and kills all of it at the deadline (status 124).
    timeout = ["timeout", "--kill-after=5", f"{hook.timeout:g}", *shell]
    q = {name: shlex.quote(str(folder / name)) for name in ("stdin", "stdout", "stderr", "status")}
    wrapper = (
        f"umask 077; {shlex.join(timeout)} <{q['stdin']} >{q['stdout']} 2>{q['stderr']}; "
        f"echo $? >{q['status']}.part && mv {q['status']}.part {q['status']}"
    )
    spec = executor.spec(request._replace(command=wrapper, shell="bash", stdin=None))
    process = subprocess.Popen(
        spec.argv,
        env=dict(spec.env),
        cwd=spec.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return DetachedHook(dialect, event, hook, tool, folder, process)
