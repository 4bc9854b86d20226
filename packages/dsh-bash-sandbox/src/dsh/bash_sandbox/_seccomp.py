"""The seccomp filter a confined command runs under: no Unix socket of its own making.

A Unix socket on a path the sandbox can see (``dsh serve``'s, an ssh-agent's, D-Bus, a container
daemon's) would answer a confined command and act outside the sandbox for it; bind mounts cannot
stop that, since ``connect()`` writes nothing to the file system. The filter refuses
``socket(AF_UNIX, ...)`` with ``EPERM``, so no such connection can be made (``socketpair()``, a
pipe between a process's own children, still works); io_uring, which can make and connect
sockets without that call, is refused whole (``ENOSYS``, as on a kernel without it). It is built once per process with
libseccomp, through `pyseccomp <https://pypi.org/project/pyseccomp/>`_ (ctypes over the system's
``libseccomp.so.2``), and handed to bubblewrap as ``--seccomp FD``, which installs it in the
sandbox before the command starts (a filter outlives ``execve`` and cannot be removed).
Syscalls of another architecture than the native one (x32, i386 on x86-64) kill the process,
libseccomp's default, so the filter cannot be walked around through ``socketcall``.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import tempfile


class FilterError(Exception):
    """The filter cannot be built here (libseccomp missing): a confined command must not run."""


@functools.cache
def unix_socket_filter() -> bytes:
    """The BPF program refusing ``socket(AF_UNIX, ...)``, as bubblewrap's ``--seccomp`` reads it."""
    try:
        import pyseccomp as seccomp
    except Exception as exc:  # the module loads libseccomp.so.2 on import: an OSError or AttributeError
        raise FilterError(
            f"the seccomp filter that keeps confined commands off Unix sockets cannot be built ({exc}); "
            "install libseccomp (Debian: apt-get install libseccomp2) and the pyseccomp package"
        ) from None
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "socket", seccomp.Arg(0, seccomp.EQ, socket.AF_UNIX))
    # io_uring makes sockets and connects them without the socket() call (IORING_OP_SOCKET, Linux 5.19).
    for call in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), call)
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        program: bytes = out.read()
    return program


def filter_fd(program: bytes) -> int:
    """A fresh descriptor bubblewrap reads ``program`` from (the read end of a pipe, already written and closed).

    One per command: bubblewrap reads it to its end, so a descriptor cannot serve two commands.
    """
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's capacity, so never blocks
    except OSError:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
