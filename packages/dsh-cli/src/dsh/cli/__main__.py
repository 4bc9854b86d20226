"""``python -m dsh.cli`` runs the ``dsh`` command."""

from ._fast._client import run

run()
