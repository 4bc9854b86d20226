"""The served peer check, with this process's namespaces read once (``own_namespaces``) or at each client."""

import os
import subprocess
import sys

from dsh.cli._serve import Namespaces, foreign_namespace, own_namespaces


def test_a_client_in_our_namespaces_is_served_whether_ours_were_read_once_or_now() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as peer:
        try:
            assert foreign_namespace(peer.pid, own_namespaces()) is None
            assert foreign_namespace(peer.pid) is None
        finally:
            peer.kill()


def test_the_namespaces_read_once_are_compared_with_each_clients() -> None:
    ours = own_namespaces()
    deeper = Namespaces(ours.depth + 1, ours.mount)
    elsewhere = Namespaces(ours.depth, (ours.mount[0], ours.mount[1] + 1))
    assert "from another PID namespace" in str(foreign_namespace(os.getpid(), deeper))
    assert "from another mount namespace" in str(foreign_namespace(os.getpid(), elsewhere))


def test_a_client_whose_status_cannot_be_read_is_refused() -> None:
    with subprocess.Popen([sys.executable, "-c", "pass"]) as gone:
        gone.wait()
    assert "whose PID namespace cannot be read" in str(foreign_namespace(gone.pid, own_namespaces()))
