"""A throw-away remote host for tests and benchmarks: a real OpenSSH ``sshd`` on a loopback port.

The "host" is a mount namespace (made with bubblewrap) over this machine's file system in which a
private ``/etc/passwd``, ``/etc/shadow``, ``/etc/group``, ``/etc/environment`` and PAM config are bound:
it has its own user (``dshremote``, home in the private folder) and its own login environment, and
nothing of the real system is changed. Its PID namespace is its own, so :meth:`TemporaryHost.kill`
takes down sshd and every command it runs at once, as a host that dies. Needs root, ``sshd``
(Debian's ``openssh-server``), ``ssh-keygen`` and ``bwrap``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

USER = "dshremote"
REMOTE_ONLY = Path("/mnt/dsh-remote-only")
"""A folder the host has (its user's, empty at start) and this machine does not: a working directory there."""
"""The throw-away user's name on the host."""
UID = 47213


class HostUnavailable(RuntimeError):
    """The host cannot be started here (not root, no sshd, no bwrap): the message says which."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class TemporaryHost:
    """An sshd on ``127.0.0.1:port`` in a private folder; :meth:`start`, :meth:`stop`, :meth:`cleanup`."""

    def __init__(self, *, environment: str = "", bashrc: str = "") -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dsh-sshd-"))
        os.chmod(self.root, 0o755)
        self.home = self.root / "home"
        self.port = _free_port()
        self.host = "127.0.0.1"
        self.user = USER
        self.identity_file = self.root / "client" / "id_ed25519"
        self.known_hosts = self.root / "client" / "known_hosts"
        self.environment = environment
        self.bashrc = bashrc
        self._proc: subprocess.Popen[bytes] | None = None
        self.log = self.root / "sshd.log"

    def setup(self) -> None:
        """Make the keys, the user and the config, then :meth:`start`."""
        if os.geteuid() != 0:
            raise HostUnavailable("the test sshd needs root (it runs as a privileged daemon)")
        for tool in ("ssh-keygen", "bwrap"):
            if shutil.which(tool) is None:
                raise HostUnavailable(f"the test sshd needs {tool}")
        if not Path("/usr/sbin/sshd").exists():
            raise HostUnavailable("the test sshd needs /usr/sbin/sshd (Debian: apt-get install openssh-server)")
        etc = self.root / "etc"
        for folder in (
            etc / "pam.d",
            self.root / "client",
            self.root / "run-sshd",
            self.home / ".ssh",
            self.root / "remote",
        ):
            folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "run-sshd", 0o755)
        os.chmod(self.root / "client", 0o700)
        self.rekey()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.identity_file)], check=True)
        (self.home / ".ssh" / "authorized_keys").write_text(self.identity_file.with_suffix(".pub").read_text())
        (self.home / ".bashrc").write_text(self.bashrc)
        (etc / "passwd").write_text(
            Path("/etc/passwd").read_text() + f"{USER}:x:{UID}:{UID}:dsh test:{self.home}:/bin/bash\n"
        )
        (etc / "group").write_text(Path("/etc/group").read_text() + f"{USER}:x:{UID}:\n")
        (etc / "shadow").write_text(Path("/etc/shadow").read_text() + f"{USER}:*:20000:0:99999:7:::\n")
        os.chmod(etc / "shadow", 0o640)
        (etc / "environment").write_text(self.environment)
        # Only what a pubkey login needs of PAM, and pam_env reading /etc/environment as Debian's does.
        (etc / "pam.d" / "sshd").write_text(
            "auth required pam_deny.so\naccount required pam_permit.so\nsession required pam_env.so readenv=1\n"
        )
        for path in self.home.rglob("*"):
            os.chown(path, UID, UID)
        os.chown(self.home, UID, UID)
        os.chown(self.root / "remote", UID, UID)
        (self.root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.root / 'host_key'}\n"
            f"PidFile {self.root / 'sshd.pid'}\nAuthorizedKeysFile {self.home / '.ssh' / 'authorized_keys'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\nStrictModes no\n"
            "PermitRootLogin no\nPermitUserEnvironment no\nX11Forwarding no\nLogLevel VERBOSE\n"
        )
        self.start()

    def rekey(self) -> None:
        """Give the host a new host key and trust it in :attr:`known_hosts` (a fresh install, say)."""
        key = self.root / "host_key"
        for old in (key, key.with_suffix(".pub")):
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        public = key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[{self.host}]:{self.port} {public[0]} {public[1]}\n")

    def change_host_key(self) -> None:
        """A new host key the client's :attr:`known_hosts` does not know (a man in the middle, to the client)."""
        trusted = self.known_hosts.read_text()
        self.rekey()
        self.known_hosts.write_text(trusted)

    def start(self) -> None:
        """Start sshd in its own namespaces and wait until it answers."""
        etc = self.root / "etc"
        binds = []
        for name in ("passwd", "group", "shadow", "environment"):
            binds += ["--bind", str(etc / name), f"/etc/{name}"]
        argv = [
            "bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--die-with-parent",
            *binds, "--bind", str(etc / "pam.d" / "sshd"), "/etc/pam.d/sshd",
            "--bind", str(self.root / "run-sshd"), "/run/sshd",
            "--tmpfs", str(REMOTE_ONLY.parent), "--bind", str(self.root / "remote"), str(REMOTE_ONLY),
            "/usr/sbin/sshd", "-D", "-e", "-f", str(self.root / "sshd_config"),
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise HostUnavailable(f"the test sshd exited at start: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1) as sock:
                if sock.recv(8).startswith(b"SSH-"):
                    return
            time.sleep(0.05)
        self.kill()
        raise HostUnavailable(f"the test sshd did not answer on port {self.port}: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """Kill sshd and everything running on the host at once (its PID namespace ends)."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None

    stop = kill

    def freeze(self) -> None:
        """Stop (SIGSTOP) every sshd process of the host, the listener and each connection's, as a link
        that hangs: the commands run on, and nothing reaches the client (nor answers its keep-alives)."""
        for pid in self._sshd_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Continue (SIGCONT) what :meth:`freeze` stopped."""
        for pid in self._sshd_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def _sshd_pids(self) -> list[int]:
        """The sshd processes under this host's bubblewrap (``sshd``, ``sshd-session``, ...), not its commands."""
        if self._proc is None:
            return []
        parents: dict[int, int] = {}
        names: dict[int, bytes] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    stat = Path(f"/proc/{entry}/stat").read_bytes()
                    name, _, rest = stat.partition(b"(")[2].rpartition(b")")
                    names[int(entry)] = name
                    parents[int(entry)] = int(rest.split()[1])
        found, frontier = [], [self._proc.pid]
        while frontier:
            children = [pid for pid, parent in parents.items() if parent in frontier]
            found += [pid for pid in children if names[pid].startswith(b"sshd")]
            frontier = children
        return found

    def pids(self, marker: str) -> list[int]:
        """Processes of the host's user whose command line contains ``marker``."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if (
                        os.stat(f"/proc/{entry}").st_uid == UID
                        and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes()
                    ):
                        found.append(int(entry))
        return found

    def cleanup(self) -> None:
        """Stop the host and remove its folder."""
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)
