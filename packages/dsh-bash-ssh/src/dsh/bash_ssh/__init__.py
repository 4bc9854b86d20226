"""The bash executor on a remote host over SSH (asyncssh).

Deploy it in place of ``bash-local``: ``{id: bash-local, name: bash-ssh, config: {host, port, user,
identity_file, known_hosts}}``. :mod:`dsh.bash_ssh.testing` starts a throw-away sshd for tests.
"""

from ._ssh import SshConfig, SshError, SshExecutor, plugin

__all__ = ["SshConfig", "SshError", "SshExecutor", "plugin"]
