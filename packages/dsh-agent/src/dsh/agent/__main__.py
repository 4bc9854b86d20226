"""``python -m dsh.agent`` runs the ``dsh`` command."""

from .cli import run

run()
