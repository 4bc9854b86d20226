"""Where the home is, and which deployment is in effect: the rules every dsh process applies first."""

from __future__ import annotations

import os
from collections.abc import Mapping

HOME_ENV = "DSH_HOME"
"""The environment variable consulted when no home is configured."""

DEFAULT_HOME = "~/.dsh"
"""The home used when neither configuration nor environment names one."""

DEPLOYMENT_ENV = "DSH_DEPLOYMENT"
"""The environment variable naming the deployment file: the ``dsh`` command reads it when no
``--deployment`` is given, and dsh sets it in the shells of a harness whose deployment is a file.
Here, below every distribution, because both the fenced start-up path and bash-env (which keeps it
dsh's own: no plugin may declare it) name it."""


def home_text(
    configured: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The absolute harness home for ``configured`` under ``env`` (default :data:`os.environ`), as text.

    The configured value when given and not blank, else ``$DSH_HOME`` (blank counts as unset), else
    ``~/.dsh``. ``~`` expands against the ``HOME`` of ``env`` when it has one, so a caller resolving
    for another environment gets that user's home. Pure: creates nothing.
    (:func:`dsh.paths.resolve_dsh_home` is the same rule returning a ``Path``.)
    """
    environ = os.environ if env is None else env
    if configured is not None and str(configured).strip():
        raw = os.fspath(configured)
    else:
        from_env = environ.get(HOME_ENV, "")
        raw = from_env if from_env.strip() else DEFAULT_HOME
    return os.path.abspath(_expand_user(raw, environ))


def _expand_user(path: str, env: Mapping[str, str]) -> str:
    """``path`` with a leading ``~`` expanded against the ``HOME`` of ``env`` (``~user`` as the system says).

    ``env``'s, not this process's: ``dsh serve`` applies these rules to its clients' environments. An
    ``env`` without ``HOME`` (or a blank one) gets the user's home from the password database, as the
    shell's expansion does; never this process's ``$HOME``, which a server's may differ from.
    """
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME")
        if not home:
            import pwd  # only here: an environment without HOME

            home = pwd.getpwuid(os.getuid()).pw_dir
        return home + path[1:]
    return os.path.expanduser(path)


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


def deployment_in_effect(
    flag: str | None, env: Mapping[str, str] | None = None, *, cwd: str | None = None
) -> tuple[str | None, str]:
    """The one rule every command follows to pick its deployment: ``(path, why)``, ``path`` None for the built-in one.

    ``--deployment FILE``, else ``$DSH_DEPLOYMENT``, else ``<DSH_HOME>/deployment.yaml`` when it
    exists, else the built-in default. A relative path is read from ``cwd`` (default: this
    process's working directory; ``dsh serve`` passes its client's).
    (:func:`dsh.paths.deployment.choose_deployment` is the same rule returning a ``DeploymentChoice``.)
    """
    env = os.environ if env is None else env

    def absolute(path: str) -> str:
        return os.path.abspath(path) if cwd is None else os.path.normpath(os.path.join(cwd, path))

    if flag:
        return absolute(flag), "given with --deployment"
    named = env.get(DEPLOYMENT_ENV, "").strip()
    if named:
        return absolute(_expand_user(named, env)), f"named by ${DEPLOYMENT_ENV}"
    in_home = os.path.join(home_text(None, env), "deployment.yaml")
    if os.path.isfile(in_home):
        return in_home, "found in DSH_HOME"
    return None, f"built-in default: no --deployment, no ${DEPLOYMENT_ENV}, no {in_home}"
