"""Which deployment is in effect, and why (standard library only, cheap to import).

The one rule every ``dsh`` command, the serve socket and an embedding ``Harness`` follow:
``--deployment FILE``, else ``$DSH_DEPLOYMENT``, else ``<DSH_HOME>/deployment.yaml`` when it exists,
else the built-in one. Here, below every distribution, because the fenced start-up path of the
command (which imports nothing above this package) and the harness library both apply it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping  # already loaded by `site`: no start-up cost

from dsh.paths import DEPLOYMENT_ENV, HOME_ENV, home_text


class DeploymentChoice:
    """Which deployment a command uses and why: ``path`` is None for the built-in one."""

    # A plain class: dataclasses costs the served client's start-up several milliseconds.
    __slots__ = ("path", "reason")

    def __init__(self, path: str | None, reason: str) -> None:
        self.path = path
        self.reason = reason

    def __repr__(self) -> str:
        return f"DeploymentChoice({self.path!r}, {self.reason!r})"


def choose_deployment(
    flag: str | None, env: Mapping[str, str] | None = None, *, cwd: str | None = None
) -> DeploymentChoice:
    """The one rule every command follows to pick its deployment.

    ``--deployment FILE``, else ``$DSH_DEPLOYMENT``, else ``<DSH_HOME>/deployment.yaml`` when it
    exists, else the built-in default. A relative path is read from ``cwd`` (default: this
    process's working directory; ``dsh serve`` passes its client's).
    """
    env = os.environ if env is None else env

    def absolute(path: str) -> str:
        return os.path.abspath(path) if cwd is None else os.path.normpath(os.path.join(cwd, path))

    if flag:
        return DeploymentChoice(absolute(flag), "given with --deployment")
    named = env.get(DEPLOYMENT_ENV, "").strip()
    if named:
        return DeploymentChoice(absolute(os.path.expanduser(named)), f"named by ${DEPLOYMENT_ENV}")
    in_home = os.path.join(home_text(None, env), "deployment.yaml")
    if os.path.isfile(in_home):
        return DeploymentChoice(in_home, "found in DSH_HOME")
    return DeploymentChoice(None, f"built-in default: no --deployment, no ${DEPLOYMENT_ENV}, no {in_home}")


def relative_home(env: Mapping[str, str] | None = None) -> str | None:
    """Why ``$DSH_HOME`` cannot be used, when it is relative; None when it is absolute, ``~``-based or unset.

    The ``dsh`` command refuses a relative home rather than resolving it against the working
    directory: every command, a served client and its server must agree on one home wherever
    they run, and a home that moves with ``cd`` would silently split sessions and sockets.
    """
    raw = (os.environ if env is None else env).get(HOME_ENV, "")
    if not raw.strip() or os.path.isabs(raw) or raw.startswith("~"):
        return None
    return f'${HOME_ENV} is the relative path {raw!r}; set it to an absolute path (for example DSH_HOME="$PWD/{raw}")'
