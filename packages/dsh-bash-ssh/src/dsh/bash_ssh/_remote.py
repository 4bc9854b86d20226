"""What is sent to the remote host: one command line that builds the child's environment there.

sshd runs the line with the user's login shell (``$SHELL -c LINE``), after PAM (``/etc/environment``)
and, for bash, ``~/.bashrc`` have had their say. The line never relies on ``AcceptEnv``:

1. it changes to the working directory (or says it cannot, and stops), then prints a marker with
   its own pid on stderr (and the marker alone on stdout), so the client can drop whatever a login
   profile printed before it and knows the process group to kill (sshd made the login shell a
   session leader, and every ``exec`` below keeps its pid);
2. it ``exec``s ``env -u BASH_ENV -u ENV -u SHELLOPTS ... bash --noprofile --norc -c PRELUDE`` without
   the names that make bash run code of the environment's choosing (``dsh.bash.SHELL_CODE_KEYS``) and
   without the functions the login environment exports (``BASH_FUNC_*``): no start-up file runs, and
   no function stands in for a builtin of the prelude or a command of the child;
3. the prelude unsets an outer harness's identity (``dsh.bash.harness_identity_keys()``, exactly),
   every exported ``DSH_*`` name (any case) and the credential-shaped names of the remote side,
   exports the environment dsh built (terminal settings, the ordinary ``env``, the ``DSH_*``
   snapshot last) and ``exec``s the shell's argv. So the child's environment follows the local
   recipe there too, whatever the host's profile exports.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from dsh.bash import DSH_ENV_PREFIX, EXPORTED_FUNCTION_PREFIX, SHELL_CODE_KEYS, harness_identity_keys
from dsh.session.trace import CARRIER_NAMES

NO_CWD = "nocwd"
"""Said after the marker instead of a pid when the working directory does not exist on the host (nothing ran)."""

_FUNCTIONS = f"$(env | sed -n 's/^\\({EXPORTED_FUNCTION_PREFIX}[A-Za-z0-9_.:@+-]*%%\\)=.*/-u \\1/p')"
"""``-u NAME`` for each function the login environment exports (``BASH_FUNC_unset%%``): bash would
import it, and a function named ``unset`` or ``printenv`` stands in for the builtin or the command,
in the prelude and in the command alike. A name of other characters is not matched (none of bash's
builtins has one)."""


_CARRIERS = "".join(f"|| [[ $name == {name} ]] " for name in sorted(CARRIER_NAMES))
"""The trace-context carriers are managed like ``DSH_*``: a login environment's never reaches the command."""


def remote_line(
    marker: str,
    argv: tuple[str, ...],
    env: Mapping[str, str],
    cwd: str | None,
    credentials: str | None,
) -> str:
    """The command line for sshd: working directory, marker, clean shell, prelude, then ``argv`` with ``env``."""
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    prelude = [
        f"unset -v {' '.join(sorted(harness_identity_keys()))}",  # exact names, as the local recipe drops them
        "shopt -s nocasematch",
        f"pattern={shlex.quote(credentials or '')}",
        f"for name in $(compgen -e); do if [[ $name == {DSH_ENV_PREFIX}* ]] {_CARRIERS}"
        '|| { [[ -n $pattern ]] && [[ $name =~ $pattern ]]; }; then unset "$name"; fi; done',
        "shopt -u nocasematch",
        "unset pattern name",
    ]
    if exports:
        prelude.append(f"export {exports}")
    prelude.append(f"exec {shlex.join(argv)}")
    inner = "\n".join(prelude)
    line = ""
    if cwd is not None:
        line = f"cd -- {shlex.quote(cwd)} 2>/dev/null || {{ printf '%s {NO_CWD}\\n' {marker} >&2; exit 125; }}; "
    return line + (
        f"printf '%s\\n' {marker}; printf '%s %s\\n' {marker} \"$$\" >&2; "
        f"exec env {' '.join(f'-u {key}' for key in sorted(SHELL_CODE_KEYS))} {_FUNCTIONS} "
        f"bash --noprofile --norc -c {shlex.quote(inner)}"
    )
