"""``CLAUDE_ENV_FILE`` / ``CODEX_ENV_FILE``: a private file per SessionStart hook, sourced afterwards.

What the files export becomes ordinary environment of the session's later shell calls. The files
live in a 0700 folder under ``<DSH_HOME>/run`` (never a shared temporary folder: one a cleaner
removed could be recreated there by another user who plants exports).
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsh.bash import DSH_ENV_PREFIX, BashExecRequest, Executor, is_managed_key
from dsh.paths import UntrustedPathError, check_trusted, ensure_private_dir

_SPLIT = "__dsh_env_file_split__"
_SHELL_STATE = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "SHELLOPTS", "BASHOPTS", "PS1", "PS2", "PS4", "IFS"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EnvFiles:
    """The env files of SessionStart hooks, and what each session's files exported."""

    def __init__(self, home: Path | None) -> None:
        self._home = home
        self._dir: Path | None = None
        self._exports: dict[str, dict[str, str]] = {}

    def new_file(self, session_id: str, index: str) -> Path:
        """A path for one hook's env file (the hook creates it), in the session's private folder."""
        if self._dir is None:
            base = ensure_private_dir(self._home / "run", "dsh run folder") if self._home is not None else None
            self._dir = Path(tempfile.mkdtemp(prefix="hook-env-", dir=base))
        # Recreated 0700 if it went away, and refused if someone else made it in the meantime.
        ensure_private_dir(self._dir, "hook env folder")
        folder = ensure_private_dir(self._dir / session_id, "hook env folder")
        return folder / f"sessionstart-hook-{index}.sh"

    def exports(self, session_id: str, parent_session: str | None = None) -> Mapping[str, str]:
        """What the session's (or else its parent's) env files exported."""
        env = self._exports.get(session_id)
        if env is None and parent_session is not None:
            env = self._exports.get(parent_session)
        return dict(env or {})

    async def load(self, executor: Executor, session_id: str, cwd: str, files: Sequence[Path]) -> list[str]:
        """Source ``files`` in order in one bash and keep what they exported; one warning per refusal."""
        present: list[Path] = []
        warnings: list[str] = []
        for f in files:
            if not (f.is_file() and f.stat().st_size > 0):
                continue
            try:
                check_trusted(f.parent, "hook env folder")
                check_trusted(f, "hook env file")
            except UntrustedPathError as exc:
                warnings.append(str(exc))
                continue
            present.append(f)
        if not present:
            return warnings
        sources = "".join(f". {shlex.quote(str(f))} >/dev/null 2>&1; " for f in present)
        command = f"env -0; printf '\\0{_SPLIT}\\0'; set -a; {sources}env -0"
        request = BashExecRequest(command=command, cwd=cwd if Path(cwd).is_dir() else None, timeout=30)
        try:
            result = await executor.run(request)
        except Exception as exc:
            return [*warnings, f"the SessionStart env files of session {session_id} could not be read: {exc}"]
        before_text, _, after_text = result.stdout.partition(f"\0{_SPLIT}\0")
        before, after = _parse(before_text), _parse(after_text)
        exports = self._exports.setdefault(session_id, {})
        for key, value in after.items():
            if before.get(key) == value or key in _SHELL_STATE or key.startswith("BASH_"):
                continue
            if not _NAME.fullmatch(key):
                continue
            if is_managed_key(key):
                warnings.append(
                    f"SessionStart env file export {key} ignored: only dsh sets managed {DSH_ENV_PREFIX}* variables"
                )
                continue
            exports[key] = value
        return warnings

    def forget(self, session_id: str) -> None:
        """Drop the session's exports and files."""
        self._exports.pop(session_id, None)
        if self._dir is not None:
            shutil.rmtree(self._dir / session_id, ignore_errors=True)

    def close(self) -> None:
        """Remove every file and the folder."""
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _parse(text: str) -> dict[str, str]:
    pairs = (item.partition("=") for item in text.split("\0") if "=" in item)
    return {k: v for k, _, v in pairs}
