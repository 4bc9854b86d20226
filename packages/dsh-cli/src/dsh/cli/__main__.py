"""``python -m dsh.cli`` runs the ``dsh`` command."""

from ._client import run

run()
