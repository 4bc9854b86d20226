"""``python -m dsh.agent`` runs the ``dsh`` command."""

from ._client import run

run()
