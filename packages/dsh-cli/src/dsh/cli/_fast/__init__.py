"""The fenced start-up path of the ``dsh`` command: everything a served or cold ``dsh exec`` needs before
a deployment is loaded, and the only place in dsh where start-up tricks are allowed.

Rules inside this folder (and nowhere else): modules import only the standard library, ``dsh.paths``
and each other; ``TYPE_CHECKING = False`` stands in for ``typing``; and start-up costs are measured
(``tests/integration/test_cold_imports.py`` holds this folder to them). Everything outside it is
ordinary Python: ``typing`` imported as usual, one argparse parser.
"""


def run() -> None:
    """The ``dsh`` console script (and ``python -m dsh.cli``): :func:`._client.run`, with the collector off first.

    Off before the fenced modules load, not after: a collection during those first imports walks
    every object the interpreter holds (about a millisecond of a served ``dsh exec``, measured), and a
    one-shot command makes little cyclic garbage (see :func:`._client.run`).
    """
    import gc

    gc.disable()
    from ._client import run as start

    start()
