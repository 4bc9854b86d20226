"""Entry point of the ``dsh`` command: the served fast path of ``dsh exec`` first, then everything else.

A line whose first word is ``exec`` is sent unread to the ``dsh serve`` of the deployment the
environment names (``_served``), without importing argparse or any of dsh's heavier modules; the
server reads it with the one parser (``dsh.cli._parser``). The one word this module looks at is
``--no-server`` before the ``--``: spelled so, no server is asked (it exists to bypass a hung one).
Every line no server takes is read by that parser here and runs in this process (``dsh.cli._cli``),
unless it is a ``dsh exec`` for another deployment whose server takes it.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys

try:
    from dsh.floor import deployment_in_effect

    from ._served import served_exec
    from ._status import FAILURE_EXIT, INTERRUPTS, OutputLost
    from ._streams import claim_streams, quiet_stdout, to_stderr
except KeyboardInterrupt:  # Ctrl-C while dsh loads: one line, no traceback (see `run`)
    from ._status import interrupted_early

    print(f"dsh: {interrupted_early('SIGINT')}", file=sys.stderr)
    sys.exit(130)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from collections.abc import Callable, Sequence
    from types import FrameType
    from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dsh`` command line; serve ``dsh exec`` through ``dsh serve`` when one listens."""
    return _main(sys.argv[1:] if argv is None else list(argv))[0]


def _main(words: list[str]) -> tuple[int, bool]:
    """:func:`main`'s status, and whether a server ran the line (then this process loaded no plugin)."""
    verb = "exec" if words[:1] == ["exec"] else None
    asked: list[str | None] = []  # the deployments whose server was asked already
    try:
        if verb == "exec" and not _bypasses_server(words):
            asked.append(deployment_in_effect(None)[0])
            code = served_exec(words, asked[0])
            if code is not None:
                return code, True
        from dsh.cli._parser import parse

        args = parse(words)
        verb = args.verb
        if args.verb == "exec" and not args.debug and not args.no_server:
            deployment = deployment_in_effect(args.deployment)[0]
            code = None if deployment in asked else served_exec(words, deployment)
            if code is not None:
                return code, True
        from dsh.cli._cli import dispatch

        return dispatch(args), False
    except OutputLost as exc:  # what ran, ran: one line, and dsh's own failure status
        print(f"dsh: {exc}", file=sys.stderr)
        quiet_stdout()
        return (FAILURE_EXIT if verb == "exec" else 1), False


def _bypasses_server(words: Sequence[str]) -> bool:
    """Whether the word ``--no-server`` stands before the ``--`` of a ``dsh exec`` line: then no server is asked first.

    Not a reading of the line (the parser reads it): it keeps a hung server from holding the one
    line meant to bypass it. Before ``--`` the word is always the option (argparse takes no word
    starting with ``--`` as a value). A line this misjudges costs time, never behaviour: an
    abbreviation (``--no-s``) is asked of the server, which answers that the client runs it; a
    ``--no-server`` among the command's words of a line without ``--`` skips the first ask, and
    :func:`main` asks once the parser read the line.
    """
    return "--no-server" in words[: words.index("--") if "--" in words else len(words)]


def _stop_loading(_signum: int, _frame: object) -> None:
    """SIGINT while dsh loads its modules: nothing ran, so stop here, at once, with the one line.

    Not ``KeyboardInterrupt``: raised inside a C extension's initialisation (orjson's, measured) it
    can crash the interpreter (SIGSEGV) instead of unwinding.
    """
    from ._status import interrupted_early

    to_stderr(f"dsh: {interrupted_early('SIGINT')}\n")
    os._exit(130)


def _exiting(code: int, signals: Any) -> Callable[[int, FrameType | None], None]:
    """A handler for a signal that comes once the verb returned: its status stands, one line says so.

    Not ``_stop_loading``'s "nothing ran" (the verb ran), and not a death by the signal.
    """

    def handler(signum: int, _frame: FrameType | None) -> None:
        name = next((n for n in INTERRUPTS if getattr(signals, n, None) == signum), signum)
        to_stderr(f"dsh: {name} came as dsh was exiting; exit status {code} stands\n")
        os._exit(code)

    return handler


def _ending_signals(signals: Any) -> list[int]:
    """The numbers of ``INTERRUPTS`` this platform has."""
    return [getattr(signals, name) for name in INTERRUPTS if hasattr(signals, name)]


def _ignore_late_signals(signals: Any) -> None:
    for number in _ending_signals(signals):
        if signals.getsignal(number) is not signals.SIG_DFL:  # left at SIG_DFL: not ours to change
            signals.signal(number, signals.SIG_IGN)


def run() -> None:
    """The ``dsh`` console script."""
    claim_streams()  # before anything opens a file (see `_streams`)
    if TYPE_CHECKING:
        import signal as signals
    else:
        try:
            import _signal as signals  # the C module: `signal` adds enum (see `_served`)
        except ImportError:  # pragma: no cover - an interpreter without it
            import signal as signals
    # Until a verb installs its own handling (`cli.dispatch`, the exec paths' interrupts), Ctrl-C ends
    # dsh at once; a non-callable handler (SIG_IGN: a background job) is left as it is.
    if callable(signals.getsignal(signals.SIGINT)):
        signals.signal(signals.SIGINT, _stop_loading)
    # A one-shot command makes little cyclic garbage, and collecting while hundreds of modules load
    # is most of what the collector would do (about a tenth of a cold `dsh exec`, measured); the
    # long-running verbs (`dsh serve`, `dsh run`) turn it back on when they start (`cli.dispatch`).
    gc.disable()
    # CPython sets every Python-level handler back to SIG_DFL while it shuts down, so a Ctrl-C in its
    # last milliseconds would kill dsh by the signal; only SIG_IGN holds there. Registered first, this
    # runs last at exit: after the interpreter joined any non-daemon thread a plugin left (during
    # which `_exiting`'s handler still ends dsh on Ctrl-C) and after every other exit function.
    atexit.register(_ignore_late_signals, signals)
    code, served = 0, False
    try:
        code, served = _main(sys.argv[1:])
        # The verb is done: a signal from now on keeps its status (while its output is flushed).
        late = _exiting(code, signals)
        for number in _ending_signals(signals):
            if signals.getsignal(number) is not signals.SIG_IGN:
                signals.signal(number, late)
        if sys.stdout is not None:
            sys.stdout.flush()
    except KeyboardInterrupt:
        # SIGINT before a verb installed its own handling (while dsh loads its modules): nothing
        # ran, so one line and 128+SIGINT, never a traceback. (Python's own start-up, before any
        # dsh module runs, is out of our reach.)
        from ._status import interrupted_early

        print(f"dsh: {interrupted_early('SIGINT')}", file=sys.stderr)
        code = 130
    except BrokenPipeError:
        # The reader went away before the last of the output (`dsh env | head -1`, a served exec
        # piped into `true`): end quietly, with the status a shell tool killed by SIGPIPE has, not a
        # traceback or an "Exception ignored" line.
        quiet_stdout()
        code = code or 141
    except OSError as exc:  # the last of a verb's output (a full disk): not a traceback either
        print(f"dsh: cannot write the output to stdout: {exc.strerror or exc}", file=sys.stderr)
        quiet_stdout()
        code = code or 1
    if served:
        # A served line loaded no plugin (its server ran it), so nothing here waits on an exit function
        # or a finaliser: end without the interpreter's teardown (6% of a served `dsh exec`, measured).
        if sys.stderr is not None:
            sys.stderr.flush()
        os._exit(code)
    # Everything the command built lives until exit: freezing it spares the interpreter's
    # final collection a walk over every object (about a fifth of a cold `dsh exec`, measured).
    # The work is done and flushed by now; nothing waits on a collector-run finaliser.
    gc.freeze()
    sys.exit(code)
