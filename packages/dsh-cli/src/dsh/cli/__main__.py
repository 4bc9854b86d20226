"""``python -m dsh.cli`` runs the ``dsh`` command."""

from ._fast import run

run()
