"""``python -m dsh.cli`` runs the ``dsh`` command."""

from dsh.cli_fast import run

run()
