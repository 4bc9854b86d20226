"""The fenced start-up path of the ``dsh`` command: everything a served or cold ``dsh exec`` needs before
a deployment is loaded, and the only place in dsh where start-up tricks are allowed.

Rules inside this folder (and nowhere else): modules import only the standard library, ``dsh.paths``
and each other (the rest of ``dsh.cli`` only where the fast path ends: the parser, the in-process
verbs); ``TYPE_CHECKING = False`` stands in for ``typing``; C modules stand in for their wrappers
(``_socket``, ``_signal``, ``_json``); and start-up costs are measured
(``tests/integration/test_cold_imports.py`` holds this folder to them). No parser lives here: the
served client sends its words unread and the server reads them with the one parser
(``dsh.cli._parser``); the client's one look at its own words is ``--no-server`` before ``--``
(see ``_client._bypasses_server``). Everything outside this folder is ordinary Python: ``typing``
imported as usual, one argparse parser.
"""


def run() -> None:
    """The ``dsh`` console script (and ``python -m dsh.cli``): :func:`._client.run`, with the collector off first.

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
