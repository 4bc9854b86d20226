"""Verbs other distributions add to ``dsh``: the ``dsh.commands`` entry-point group.

An entry point ``NAME = module:attr`` in ``dsh.commands`` makes ``dsh NAME`` a verb. The group is
read only when the command line names no built-in verb (``dsh NAME``, ``dsh --help``, a typo), so a
built-in verb never pays for the scan, and the named object is imported only when its own verb
runs: ``dsh --help`` lists every such verb with its distribution's one-line summary without
importing any of them. Discovery is dsh-loader's ``Catalog``: one name claimed by two
distributions goes to the one installed first, and an import that fails is one ``dsh:`` line
naming the entry point and its distribution.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from dsh.loader import EntryPointItem

COMMANDS_GROUP = "dsh.commands"
"""The entry-point group of verbs other distributions add to ``dsh``."""

KNOWN_COMMANDS = {"mcp": "dsh-mcp"}
"""Verbs dsh's own optional distributions add, by the distribution to install for each."""


@runtime_checkable
class Command(Protocol):
    """What a ``dsh.commands`` entry point names: a verb's options and what it does.

    ``configure`` adds the verb's own options to its sub-parser (``--deployment`` and ``--debug``
    are there already); ``run`` gets the parsed line, with ``args.choice`` the deployment in
    effect (:class:`dsh.paths.deployment.DeploymentChoice`), and returns the exit status. A
    :class:`dsh.core.DshError` or ``OSError`` it raises is one ``dsh:`` line and status 1.
    """

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the verb's options and arguments to ``parser``."""
        ...

    def run(self, args: argparse.Namespace) -> int:
        """Run the verb; return the exit status."""
        ...


def discovered() -> dict[str, EntryPointItem]:
    """Every ``dsh.commands`` entry point installed, by verb (the first-installed distribution's)."""
    from dsh.loader import Catalog  # the scan costs importlib.metadata: only lines naming no built-in verb

    return {item.name: item for item in Catalog().items(COMMANDS_GROUP)}


def summary(item: EntryPointItem) -> str:
    """The verb's line in ``dsh --help``: its distribution's own summary, never its code."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        text = distribution(item.distribution).metadata["Summary"] or ""
    except PackageNotFoundError:
        text = ""
    return f"{text.rstrip('.')} ({item.distribution})" if text else f"a verb of {item.distribution} {item.version}"


def missing(verb: str) -> str | None:
    """The one sentence ``dsh VERB`` says when the distribution that adds ``VERB`` is not installed."""
    dist = KNOWN_COMMANDS.get(verb)
    if dist is None:
        return None
    return (
        f"`dsh {verb}` comes with the {dist} distribution, which is not installed in this environment; "
        f"install {dist} beside dsh-cli (from this clone's wheels: pip install --no-index "
        f"--find-links dist/wheels {dist})"
    )


def load(item: EntryPointItem) -> Command:
    """The command ``item`` names (a class is instantiated); a wrong object fails naming the entry point."""
    found = item.load()
    command = found() if isinstance(found, type) else found
    if not isinstance(command, Command):
        from dsh.core import DshError

        raise DshError(
            f"entry point '{item.name}' in group '{COMMANDS_GROUP}' ({item.value}, from {item.distribution} "
            f"{item.version}) is not a dsh command: it needs configure(parser) and run(args) methods"
        )
    return command
