"""The fenced start-up path of the ``dsh`` command: everything a served or cold ``dsh exec`` needs before
a deployment is loaded, and the only place in dsh where start-up tricks are allowed.

Rules inside this folder (and nowhere else): modules import only the standard library, ``dsh.paths``
and each other; ``TYPE_CHECKING = False`` stands in for ``typing``; and start-up costs are measured
(``tests/integration/test_cold_imports.py`` holds this folder to them). Everything outside it is
ordinary Python: ``typing`` imported as usual, one argparse parser.
"""
