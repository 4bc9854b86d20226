"""SessionStart env files (each dialect names the variable): a private file per hook, sourced afterwards.

What the files export becomes ordinary environment of the session's later shell calls. The files
live in a 0700 folder under ``<DSH_HOME>/run`` (never a shared temporary folder: one a cleaner
removed could be recreated there by another user who plants exports).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsh.bash import DSH_ENV_PREFIX, SHELL_CODE_KEYS, BashExecRequest, Executor, is_managed_key
from dsh.paths import (
    NotRegularFileError,
    UntrustedPathError,
    check_trusted,
    ensure_private_dir,
    open_regular,
    trust_fault,
)

_SPLIT = "__dsh_env_file_split__"
_SHELL_STATE = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "SHELLOPTS", "BASHOPTS", "PS1", "PS2", "PS4", "IFS"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_FILE_LIMIT = 1 << 20
"""Bytes of one hook's env file dsh sources; a larger file is refused with a warning."""


def _remove(folder: Path) -> None:
    """Remove ``folder`` and what is in it, whatever is left (a hook's files are its own business)."""
    import shutil  # only where env files were made: shutil brings its archive modules (bz2, lzma)

    shutil.rmtree(folder, ignore_errors=True)


class EnvFiles:
    """The env files of SessionStart hooks, and what each session's files exported."""

    def __init__(self, home: Path | None) -> None:
        self._home = home
        self._dir: Path | None = None
        self._exports: dict[str, dict[str, str]] = {}

    def new_file(self, session_id: str, index: str) -> Path:
        """A path for one hook's env file (the hook creates it), in the session's private folder."""
        if self._dir is None:
            import tempfile  # only once a SessionStart hook is given an env file (most commands have none)

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

    async def load(
        self,
        executor: Executor,
        session_id: str,
        cwd: str,
        files: Sequence[Path],
        ambient: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Source ``files`` in order in one bash and keep what they exported; one warning per refusal.

        The bash starts from the session's environment (``ambient``: a served client's; None: this
        process's), so ``export PATH="$PATH:/extra"`` extends the PATH its commands get.

        Each file is opened once, without following a symbolic link and without blocking (a FIFO or
        a device put in its place is refused, never waited on), and what was read from that
        descriptor is what bash evaluates: the path is not opened again.
        """
        texts: list[str] = []
        warnings: list[str] = []
        for f in files:
            try:
                text = _read_env_file(f)
            except FileNotFoundError:
                continue  # the hook wrote no file
            except (UntrustedPathError, NotRegularFileError) as exc:
                warnings.append(str(exc))
                continue
            except OSError as exc:
                why = "it is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
                warnings.append(f"refusing hook env file {f}: {why}; it was not sourced")
                continue
            if text.strip():
                texts.append(text)
        if not texts:
            return warnings
        # Each file is evaluated on its own (a syntax error in one leaves the others), from stdin.
        command = (
            f"env -0; printf '\\0{_SPLIT}\\0'; set -a; "
            "while IFS= read -r -d '' __dsh_env_file; do eval \"$__dsh_env_file\" </dev/null >/dev/null 2>&1; done; "
            "unset __dsh_env_file; env -0"
        )
        request = BashExecRequest(
            command=command,
            cwd=cwd if Path(cwd).is_dir() else None,
            timeout=30,
            stdin="".join(f"{text}\0" for text in texts),
            ambient=ambient,
        )
        try:
            result = await executor.run(request)
        except Exception as exc:
            return [*warnings, f"the SessionStart env files of session {session_id} could not be read: {exc}"]
        before_text, _, after_text = result.stdout.partition(f"\0{_SPLIT}\0")
        before, after = _parse(before_text), _parse(after_text)
        exports = self._exports.setdefault(session_id, {})
        for key, value in after.items():
            if before.get(key) == value or key in _SHELL_STATE or key in SHELL_CODE_KEYS or key.startswith("BASH_"):
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
            _remove(self._dir / session_id)

    def close(self) -> None:
        """Remove every file and the folder."""
        if self._dir is not None:
            _remove(self._dir)
            self._dir = None


def _read_env_file(path: Path) -> str:
    """The text of one hook's env file: a regular file we own, opened once, never through a link."""
    check_trusted(path.parent, "hook env folder")
    fd = open_regular(path, "hook env file", follow=False)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if trust_fault(info) is not None:
            check_trusted(path, "hook env file")  # names the fault; the descriptor is what was judged
            raise UntrustedPathError(path, f"refusing hook env file {path}: it changed while it was read")
        data = handle.read(ENV_FILE_LIMIT + 1)
    if len(data) > ENV_FILE_LIMIT:
        raise UntrustedPathError(path, f"refusing hook env file {path}: it is over {ENV_FILE_LIMIT} bytes")
    return data.decode(errors="replace").replace("\0", "")


def _parse(text: str) -> dict[str, str]:
    pairs = (item.partition("=") for item in text.split("\0") if "=" in item)
    return {k: v for k, _, v in pairs}
