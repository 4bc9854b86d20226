"""``python -m dsh.cli_fast`` runs the ``dsh`` command as the console script does.

``python -m dsh.cli`` runs it too, after importing the ``dsh.cli`` package and its exports (``Command``,
the errors: the kernel), which a served ``dsh exec`` through the script or this module never loads.
"""

from . import run

run()
