"""The fenced start-up path of the ``dsh`` command: everything a served or cold ``dsh exec`` needs before
a deployment is loaded, and the only place in dsh where start-up tricks are allowed.

A package of its own in the dsh-cli distribution, beside ``dsh.cli`` rather than in it: a served
``dsh exec`` never imports ``dsh.cli``, which is an ordinary package importing its exports.

Rules inside this package (and nowhere else): modules import only the standard library, ``dsh.floor``
(dsh-paths' standard-library floor: home, trust rule, deployment choice, signals), ``dsh.paths`` where
the cold path runs, and each other, and ``dsh.cli``'s parser and dispatch only inside the functions where the fast path
ends; ``TYPE_CHECKING = False`` stands in for ``typing``; C modules stand in for their wrappers
(``_socket``, ``_signal``, ``_json``); the collector is tuned and warnings are held until the line
is read (``_warnings``); and start-up costs are measured (``tests/integration/test_cold_imports.py``
holds this package to them). No parser lives here: the served client sends its words unread and the
server reads them with the one parser (``dsh.cli._parser``); the client's one look at its own words
is ``--no-server`` before ``--`` (see ``_client._bypasses_server``). Everything outside this package
is ordinary Python (``typing`` imported as usual); ``dsh.floor`` is too: it needs neither ``typing`` nor
``pathlib`` because its paths are text (see dsh-paths' README).
"""


def run() -> None:
    """The ``dsh`` console script (and ``python -m dsh.cli``, ``python -m dsh.cli_fast``): :func:`._client.run`, with
    the collector off first.

    Off before the fenced modules load, not after: a collection during those first imports walks
    every object the interpreter holds (about a millisecond of a served ``dsh exec``, measured), and a
    one-shot command makes little cyclic garbage (see :func:`._client.run`).

    Warnings are held first of all, before any dependency is imported, until the command knows
    where they go (``_warnings``): a library's deprecation notice (``import asyncssh`` under a newer
    cryptography) never reaches the command's stderr, served or not; ``--debug`` shows them.
    """
    import gc

    gc.disable()
    from ._warnings import hold

    hold()
    from ._client import run as start

    start()
