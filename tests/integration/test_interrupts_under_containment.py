"""A command dsh's own executor starts inside plugin code (a containment watch is active) is no
plugin replacing dsh's handlers, and a real SIGINT during it is dsh's interruption, never the plugin's failure."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from dsh.bash import BashExecRequest, Interrupted, Interrupts, LocalExecutor
from dsh.loader import contained, containment

pytestmark = pytest.mark.integration  # dsh-bash's Interrupts under dsh-loader's containment

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def test_a_command_started_inside_a_containment_prints_no_replaced_handler_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with Interrupts(SIGNALS), containment():
        result = LocalExecutor().run_sync(BashExecRequest(command="exit 2"))
    assert result.exit_code == 2
    assert "replaced dsh's" not in capfd.readouterr().err


def test_a_real_sigint_during_a_contained_command_propagates_as_dsh_s_interruption() -> None:
    def plugin_code() -> None:  # e.g. a contributor factory asking the shell once at load
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        LocalExecutor().run_sync(BashExecRequest(command="sleep 5"))

    with Interrupts(SIGNALS), pytest.raises(Interrupted):
        contained(plugin_code)
