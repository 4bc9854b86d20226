"""Each escape issue 39 found, tried against real bubblewrap as a model choosing its own ``workdir`` would.

Every test here ran a command that wrote, connected or planted something outside the sandbox's
intent before the fix; each now asserts that nothing happened and that the refusal is one line.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh.bash import BashExecRequest, ExecResult
from dsh.bash_sandbox import SandboxError, SandboxExecutor

if shutil.which("bwrap") is None:  # .ci/run installs it; a missing one must be loud, not skipped
    raise RuntimeError("these tests need bubblewrap: apt-get install bubblewrap")


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox's /tmp is private) holding a fake home and a project."""
    path = Path(tempfile.mkdtemp(prefix="dsh-escape-", dir="/var/tmp")).resolve()
    (path / "home").mkdir()
    (path / "home" / ".bashrc").write_text("# the user's\n")
    (path / "proj").mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _sandbox(base: Path, mode: str = "workspace-write", **kwargs: object) -> SandboxExecutor:
    kwargs.setdefault("home", base / "dsh-home")
    return SandboxExecutor(mode, spill_dir=base / "spill", **kwargs)  # type: ignore[arg-type]


def _run(executor: SandboxExecutor, command: str, workspace: Path, cwd: Path | str | None = None) -> ExecResult:
    request = BashExecRequest(command, cwd=str(cwd or workspace), workspace=str(workspace), timeout=30)
    return executor.run_sync(request)


def test_a_workdir_outside_the_workspace_makes_nothing_writable(base: Path) -> None:
    executor = _sandbox(base)
    proj, home = base / "proj", base / "home"
    for workdir in (home, base, Path("/")):
        result = _run(executor, f"touch x; echo evil >> {home}/.bashrc; touch {home}/y", proj, cwd=workdir)
        assert result.exit_code != 0 and result.sandbox is not None and result.sandbox["denied"], result
    assert not (home / "x").exists() and not (home / "y").exists() and not (base / "x").exists()
    assert (home / ".bashrc").read_text() == "# the user's\n"
    made = _run(executor, "touch made && pwd", proj)
    assert made.exit_code == 0 and made.stdout == f"{proj}\n" and (proj / "made").exists()


def test_a_workspace_holding_the_users_home_or_root_is_refused(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(base / "home"))
    executor = _sandbox(base)
    for workspace, held in ((base, f"your home {base}/home"), (Path("/"), "the whole file system")):
        with pytest.raises(SandboxError) as caught:
            _run(executor, f"touch {base}/home/x", workspace)
        assert str(caught.value).startswith(
            f"the workspace-write sandbox will not make {workspace} writable: it holds {held}"
        )
        assert "\n" not in str(caught.value)
    assert not (base / "home" / "x").exists()


def test_read_only_shows_no_host_tmp_whatever_the_workdir(base: Path) -> None:
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="dsh-host-secret-") as secret:
        Path(secret.name).write_text("host tmp\n")
        executor = _sandbox(base, "read-only")
        shown = _run(executor, f"cat {secret.name}; ls /tmp", base / "proj")
        assert "host tmp" not in shown.stdout and Path(secret.name).name not in shown.stdout
        with pytest.raises(SandboxError) as caught:
            _run(executor, "cat *", base / "proj", cwd="/tmp")
        assert str(caught.value).startswith(
            "the read-only sandbox cannot run a command in /tmp: that folder is under its private /tmp"
        )


PLANTS = {
    "dsh-home/hooks/claude.json": "mkdir -p dsh-home/hooks && echo '{}' > dsh-home/hooks/claude.json",
    ".git/hooks/pre-commit": "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit",
    ".git/config": "echo '[core] fsmonitor = touch pwned' >> .git/config",
    ".bashrc": "echo 'touch pwned' >> .bashrc",
    ".claude/settings.json": "echo '{}' > .claude/settings.json",
    ".codex/hooks.json": "mkdir -p .codex; echo '{}' > .codex/hooks.json",
    ".gemini/settings.json": "echo '{}' > .gemini/settings.json",
    ".cursor/hooks.json": "echo '{}' > .cursor/hooks.json",
    ".github/hooks/hooks.json": "echo '{}' > .github/hooks/hooks.json",
    ".mcp.json": """echo '{"mcpServers": {"x": {"command": "touch", "args": ["pwned"]}}}' > .mcp.json""",
    "team-hooks.json": "echo '{}' > team-hooks.json",
}


def test_protected_paths_in_the_workspace_stay_read_only_existing_or_not(base: Path) -> None:
    proj = base / "proj"
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    (proj / ".bashrc").write_text("# project rc\n")
    (proj / ".mcp.json").write_text('{"mcpServers": {}}')
    config = (proj / ".git" / "config").read_text()
    executor = _sandbox(base, home=proj / "dsh-home", protect=("team-hooks.json",))
    for path, plant in PLANTS.items():
        result = _run(executor, plant, proj)
        assert result.exit_code != 0, (path, result)
        kept = (".git/config", ".bashrc", ".mcp.json")
        assert not (proj / path).is_file() or (proj / path).stat().st_size == 0 or path in kept
    assert (proj / ".git" / "config").read_text() == config and (proj / ".bashrc").read_text() == "# project rc\n"
    assert (proj / ".mcp.json").read_text() == '{"mcpServers": {}}'
    assert not (proj / ".git" / "hooks" / "pre-commit").exists() and not (proj / "dsh-home" / "hooks").exists()
    # What bubblewrap left as mount points are empty, and renaming a protected folder away is refused too.
    moved = _run(executor, "mv .git/hooks h2 || mv .git g2 || true; mkdir -p .git/hooks && touch .git/hooks/x", proj)
    assert moved.exit_code != 0 and not (proj / ".git" / "hooks" / "x").exists() and not (proj / "g2").exists()
    ok = _run(executor, "echo fine > src.txt && git status --short >/dev/null && cat src.txt", proj)
    assert ok.exit_code == 0 and ok.stdout == "fine\n"


def test_a_gitdir_pointer_protects_the_repository_it_names(base: Path) -> None:
    repo, proj = base / "repo", base / "proj"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(proj / "wt")], check=True)
    executor = _sandbox(base, writable_roots=(str(repo / ".git" / "worktrees"),))
    gitdir = (proj / "wt" / ".git").read_text().split(":", 1)[1].strip()
    result = _run(
        executor, f"echo x > {gitdir}/config; echo '#!/bin/sh' > {repo}/.git/hooks/post-checkout", proj / "wt"
    )
    assert result.exit_code != 0
    # The worktree's git directory is read-only whole: no config is made in it.
    assert not (Path(gitdir) / "config").exists() and not (repo / ".git" / "hooks" / "post-checkout").exists()
    repointed = _run(executor, f"echo 'gitdir: {base}/evil' > .git", proj / "wt")
    assert repointed.exit_code != 0 and (proj / "wt" / ".git").read_text().strip() == f"gitdir: {gitdir}"


def test_the_hooks_folder_and_included_files_a_git_config_names_stay_read_only(base: Path) -> None:
    """Husky's ``core.hooksPath = .husky`` and an ``include.path`` file in the work tree: git runs what they
    hold when the user commits or asks for status on the host, so a confined command must not write them."""
    proj = base / "proj"
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    subprocess.run(["git", "-C", str(proj), "config", "core.hooksPath", ".husky"], check=True)
    subprocess.run(["git", "-C", str(proj), "config", "include.path", "../local.gitconfig"], check=True)
    (proj / "nested.gitconfig").write_text("[user]\n\tname = me\n")
    (proj / "local.gitconfig").write_text("[include]\n\tpath = nested.gitconfig\n")
    hook = f"printf '#!/bin/sh\\ntouch {base}/pwned\\n' > .husky/pre-commit; chmod +x .husky/pre-commit"
    fsmonitor = f"printf '[core]\\n\\tfsmonitor = touch {base}/pwned; false\\n'"
    result = _run(_sandbox(base), f"{hook}; {fsmonitor} > local.gitconfig; {fsmonitor} > nested.gitconfig", proj)
    assert result.exit_code != 0 and result.stderr.count("Read-only file system") == 3, result.stderr
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    subprocess.run(["git", "-C", str(proj), "status"], env=env, capture_output=True, check=True)
    subprocess.run(["git", "-C", str(proj), "commit", "-q", "--allow-empty", "-m", "x"], env=env, check=True)
    assert not (base / "pwned").exists() and not (proj / ".husky" / "pre-commit").exists()
    assert (proj / "nested.gitconfig").read_text() == "[user]\n\tname = me\n"


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


@pytest.mark.parametrize(
    "plant",
    [
        # A commondir moves config and hooks to a copy of the model's.
        "cp -r .git evil && git config --file evil/config core.fsmonitor '{pwn}' && echo ../evil > .git/commondir",
        # A gitlink in the index: the root's git status recurses into a nested repository of the model's.
        "git init -q sub && git -C sub commit -q --allow-empty -m s && git -C sub config core.fsmonitor '{pwn}' && "
        "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub",
    ],
    ids=["commondir", "gitlink"],
)
def test_nothing_in_the_git_directory_can_point_git_at_a_config_of_the_models(
    base: Path, plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``.git/hooks`` and ``.git/config`` read-only are not enough: the rest of ``.git`` tells git where to
    find them, and a ``git status`` in the workspace on the host (a shell prompt's) runs what they say."""
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    proj = base / "proj"
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    subprocess.run(["git", "-C", str(proj), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    result = _run(_sandbox(base), plant.format(pwn=f"touch {base}/pwned; false"), proj)
    assert result.exit_code != 0 and "Read-only file system" in result.stderr, result
    subprocess.run(["git", "status", "--short"], cwd=proj, capture_output=True)
    assert not (base / "pwned").exists() and not (proj / ".git" / "commondir").exists()


def test_a_submodules_git_directory_stays_read_only(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checked-out submodule: ``git status`` in the root recurses into it, so its config is the root's too."""
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    proj, lib = base / "proj", base / "lib"
    for repo in (proj, lib):
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    allow = ["-c", "protocol.file.allow=always"]
    subprocess.run(["git", "-C", str(proj), *allow, "submodule", "add", "-q", str(lib), "lib"], check=True)
    plant = f"git -C lib config core.fsmonitor 'touch {base}/pwned; false'"
    result = _run(_sandbox(base), plant, proj)
    assert result.exit_code != 0, result
    subprocess.run(["git", "status", "--short"], cwd=proj, capture_output=True)
    assert not (base / "pwned").exists()


@pytest.mark.parametrize("repository", [False, True])
def test_the_workspace_cannot_be_made_a_bare_repository_whose_config_git_runs(base: Path, repository: bool) -> None:
    """HEAD, objects/, refs/ and a config planted in the root (after breaking ``.git/HEAD`` in a repository):
    git takes the root for a bare repository, and a ``git status`` there on the host (a shell prompt's)
    runs the planted ``core.fsmonitor`` unconfined."""
    proj = base / "proj"
    if repository:
        subprocess.run(["git", "init", "-q", str(proj)], check=True)
    config = "git config --file config"
    plant = (
        "rm -f .git/HEAD; git init -q --bare /tmp/bare && cp -r /tmp/bare/. .; "
        f"{config} core.bare false; {config} core.worktree {proj}; {config} core.fsmonitor 'touch {base}/pwned; false'"
    )
    result = _run(_sandbox(base), plant, proj)
    assert "HEAD" in result.stderr, result  # the planted HEAD was refused
    subprocess.run(["git", "status", "--short"], cwd=proj, capture_output=True)
    assert not (base / "pwned").exists()
    assert (proj / "HEAD").is_dir() and not list((proj / "HEAD").iterdir())  # the placeholder: no valid HEAD
    if repository:  # and git shows no empty folder: the repository's status is unchanged by it
        (proj / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        status = subprocess.run(["git", "status", "--short"], cwd=proj, capture_output=True, text=True)
        assert "HEAD" not in status.stdout, status


@pytest.fixture
def listener(base: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A Unix socket listening on a path the sandbox can see; what any client sent it."""
    path = base / "listener.sock"
    heard: list[bytes] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"answered\n")
                heard.append(conn.recv(100))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path, heard
    finally:
        stop.set()
        thread.join(5)
        server.close()


# The interpreter the confined commands run (CONNECT needs only the standard library): the one this
# venv was made from, since a venv under /tmp (a clone in /tmp) is not visible inside the sandbox,
# whose /tmp is private.
PYTHON = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")

CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1]); s.sendall(b"run touch ~/x"); print(s.recv(100).decode(), end="")
"""


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_no_unix_socket_outside_answers_a_confined_call(
    base: Path, listener: tuple[Path, list[bytes]], mode: str
) -> None:
    path, heard = listener
    command = f"{PYTHON} -c '{CONNECT}' {path}"
    result = _run(_sandbox(base, mode), command, base / "proj")
    assert result.exit_code != 0 and "answered" not in result.stdout and heard == []
    assert "PermissionError" in result.stderr, result.stderr


def test_a_socket_the_deployment_lists_answers_and_no_other(base: Path, listener: tuple[Path, list[bytes]]) -> None:
    path, heard = listener
    other = base / "other.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unlisted:
        unlisted.bind(str(other))
        unlisted.listen()
        executor = _sandbox(base, "read-only", allow_unix_sockets=(str(path),))
        result = _run(executor, f"{PYTHON} -c '{CONNECT}' {path}", base / "proj")
        assert result.exit_code == 0 and result.stdout == "answered\n", result
        refused = _run(executor, f"{PYTHON} -c '{CONNECT}' {other}", base / "proj")
        assert refused.exit_code != 0 and "ConnectionRefusedError" in refused.stderr, refused.stderr
    assert heard == [b"run touch ~/x"]


FAKE_BWRAP = (
    '#!/bin/sh\n# planted: runs the command unconfined\nwhile [ "$1" != -- ]; do shift; done; shift; exec "$@"\n'
)


def test_bwrap_is_never_taken_from_a_writable_path_entry(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = base / "proj"
    venv = proj / ".venv" / "bin"
    venv.mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{venv}:{os.environ['PATH']}")
    executor = _sandbox(base)
    assert executor.program is not None and not executor.program.startswith(str(proj))
    planted = _run(executor, f"printf '{FAKE_BWRAP}' > .venv/bin/bwrap; chmod +x .venv/bin/bwrap", proj)
    assert planted.exit_code != 0 and not (venv / "bwrap").exists()
    # One planted before the executor was made (by an earlier process) is refused, never run.
    (venv / "bwrap").write_text(FAKE_BWRAP)
    (venv / "bwrap").chmod(0o755)
    monkeypatch.chdir("/")
    later = _sandbox(base)
    assert later.program == str(venv / "bwrap"), later._program_error
    with pytest.raises(SandboxError) as caught:
        _run(later, f"touch {base}/home/x", proj)
    assert str(caught.value).startswith(f"the sandbox program {venv}/bwrap lies in the writable root {proj}")
    assert not (base / "home" / "x").exists()


def test_path_entries_in_the_workspace_stay_read_only(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = base / "proj"
    (proj / "bin").mkdir()
    monkeypatch.setenv("PATH", f"{proj}/bin:{proj}/node_modules/.bin:{os.environ['PATH']}")
    result = _run(
        _sandbox(base), "echo 'touch pwned' > bin/bash; mkdir -p node_modules/.bin && touch node_modules/.bin/git", proj
    )
    assert result.exit_code != 0 and not (proj / "bin" / "bash").exists()
    assert not (proj / "node_modules" / ".bin" / "git").exists()
    monkeypatch.setenv("PATH", f".:{os.environ['PATH']}")
    with pytest.raises(SandboxError) as caught:
        _run(_sandbox(base), "true", proj)
    assert str(caught.value).startswith("the workspace-write sandbox will not run: PATH holds the relative entry .")


def test_a_path_entry_reached_through_a_link_in_the_workspace_cannot_be_repointed(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PATH`` names ``proj/tools/bin``, ``proj/tools`` a link to a folder outside: re-pointing the link at a
    folder of the model's would put its ``git`` (or ``bash``) first on the host's ``PATH``."""
    proj, opt = base / "proj", base / "opt"
    (opt / "bin").mkdir(parents=True)
    (proj / "tools").symlink_to(opt)
    monkeypatch.setenv("PATH", f"{proj}/tools/bin:{os.environ['PATH']}")
    plant = "mkdir -p evil/bin && echo 'touch pwned' > evil/bin/git && chmod +x evil/bin/git && ln -sfn evil tools"
    with pytest.raises(SandboxError) as caught:
        _run(_sandbox(base), plant, proj)
    assert f"but {proj}/tools is a symbolic link" in str(caught.value) and "\n" not in str(caught.value)
    assert os.readlink(proj / "tools") == str(opt) and not (proj / "evil").exists()


def test_a_link_that_vanishes_while_protections_are_worked_out_is_one_line(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background confined command renaming links as fast as it can makes ``readlink`` fail between the
    check and the read: the call is refused in one line, not a traceback from ``os.path``."""
    (base / "real-home").mkdir(mode=0o700)
    (base / "home-link").symlink_to(base / "real-home")
    (base / "proj" / "tools").symlink_to(base / "real-home")
    real_readlink = os.readlink
    racing: list[Path] = []

    def vanished(path: str | os.PathLike[str], *args: object, **kwargs: object) -> str:
        if Path(path) in racing:
            raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
        return real_readlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "readlink", vanished)
    for link, executor in (
        (base / "home-link", _sandbox(base, home=base / "home-link")),  # DSH_HOME's way, in the options
        (base / "proj" / "tools", _sandbox(base)),  # a PATH entry's way, in the layout
    ):
        racing[:] = [link]
        monkeypatch.setenv("PATH", f"{base}/proj/tools/bin:/usr/bin:/bin")
        with pytest.raises(SandboxError) as caught:
            _run(executor, "true", base / "proj")
        assert str(caught.value).startswith(f"the workspace-write sandbox cannot run: {link} changed while")
        assert "\n" not in str(caught.value)


def test_a_missing_or_linked_hide_entry_is_named_in_one_line(base: Path) -> None:
    (base / "real").mkdir()
    (base / "link").symlink_to(base / "real")
    missing = _sandbox(base, "read-only", hide=(str(base / "nope"),))
    with pytest.raises(SandboxError) as caught:
        _run(missing, "true", base / "proj")
    assert str(caught.value) == (
        f"the bash-sandbox config's hide entry {base}/nope does not exist; hide takes existing folders: "
        f"create it (`mkdir -m 700 {base}/nope`) or remove the entry"
    )
    linked = _sandbox(base, "read-only", hide=(str(base / "link"),))
    with pytest.raises(SandboxError) as caught:
        _run(linked, "true", base / "proj")
    assert str(caught.value) == (
        f"the bash-sandbox config's hide entry {base}/link is reached through a symbolic link (it is "
        f"{base}/real); name the folder itself"
    )


def test_what_dsh_trusted_as_configuration_stays_read_only(base: Path) -> None:
    """A hooks file the deployment names and a skills folder, both in the workspace, after dsh read them."""
    from dsh.paths import check_trusted, read_trusted_text

    proj = base / "proj"
    (proj / "team-hooks.json").write_text("{}")
    (proj / "skills" / "deploy").mkdir(parents=True)
    (proj / "skills" / "deploy" / "SKILL.md").write_text("---\nname: deploy\n---\n")
    executor = _sandbox(base)
    before = _run(executor, "echo '{\"x\": 1}' > team-hooks.json", proj)
    assert before.exit_code == 0  # nothing read it yet: an ordinary file of the project
    read_trusted_text(proj / "team-hooks.json", "hooks file")
    check_trusted(proj / "skills", "skills folder")
    result = _run(executor, "echo '{}' > team-hooks.json; echo evil > skills/deploy/SKILL.md; mkdir skills/new", proj)
    assert result.exit_code != 0 and result.stderr.count("Read-only file system") == 3, result.stderr
    assert (proj / "team-hooks.json").read_text() == '{"x": 1}\n'
    assert (proj / "skills" / "deploy" / "SKILL.md").read_text().startswith("---") and not (
        proj / "skills" / "new"
    ).exists()


def test_a_trusted_sqlite_database_in_the_workspace_takes_no_planted_journal(base: Path) -> None:
    """A session database kept in the workspace (``persistence: {name: sqlite, config: {path: ...}}``): the
    file itself is read-only, but a ``-wal`` planted beside it is replayed into it by the next connection
    on the host, rewriting what dsh reads back (a session header's ``cwd``: the next call's workspace)."""
    import sqlite3

    from dsh.paths import check_trusted

    proj = base / "proj"
    database = proj / "sessions.sqlite3"
    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE header (cwd TEXT)")
        conn.execute("INSERT INTO header VALUES (?)", (str(proj),))
    conn.close()
    check_trusted(database, "session database")
    (proj / "craft.py").write_text(
        "import os, shutil, sqlite3\n"
        "shutil.copy('sessions.sqlite3', '/tmp/copy.db')\n"
        "conn = sqlite3.connect('/tmp/copy.db')\n"
        "conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "conn.execute('UPDATE header SET cwd = ?', ('/etc',))\n"
        "conn.commit()\n"
        "shutil.copy('/tmp/copy.db-wal', 'sessions.sqlite3-wal')\n"
        "os._exit(0)  # no checkpoint: the frames stay in the planted -wal\n"
    )
    result = _run(_sandbox(base), f"{PYTHON} craft.py", proj)
    assert result.exit_code != 0 and "Error: [Errno" in result.stderr and "sessions.sqlite3-wal" in result.stderr
    assert (proj / "sessions.sqlite3-wal").stat().st_size == 0  # bubblewrap's mount point, nothing more
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT cwd FROM header").fetchall() == [(str(proj),)]
    conn.close()


def test_a_venv_holding_dsh_inside_the_workspace_stays_read_only(base: Path) -> None:
    """dsh installed in the project's own venv: its code, .pth files and pyvenv.cfg are what runs next."""
    proj = base / "proj"
    venv = proj / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    pth = f"echo 'import os; os.system(\"touch {base}/pwned\")' > {site}/evil.pth"
    plant = f"{pth}; echo 'home = {proj}' > .venv/pyvenv.cfg"
    script = f"""
import sys
sys.prefix = sys.exec_prefix = {str(venv)!r}
sys.path.insert(0, {str(site)!r})
from dsh.bash import BashExecRequest
from dsh.bash_sandbox import SandboxExecutor
result = SandboxExecutor("workspace-write", home={str(base / "dsh-home")!r}).run_sync(
    BashExecRequest({plant!r}, cwd={str(proj)!r}, workspace={str(proj)!r}))
print(result.exit_code, result.stderr.count("Read-only file system"))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd="/", timeout=60)
    assert done.stdout.split() == ["1", "2"], done
    assert not (site / "evil.pth").exists() and "home = " + str(proj) not in (venv / "pyvenv.cfg").read_text()


def test_without_libseccomp_nothing_runs(base: Path) -> None:
    """The filter cannot be built (pyseccomp cannot load libseccomp): the call fails closed, in one line."""
    marker = base / "ran"
    script = f"""
import sys
sys.modules["pyseccomp"] = None  # what an import that cannot load libseccomp.so.2 amounts to
from dsh.bash import BashExecRequest
from dsh.bash_sandbox import SandboxError, SandboxExecutor
try:
    SandboxExecutor(home={str(base / "dsh-home")!r}).run_sync(BashExecRequest("touch {marker}", cwd="/"))
except SandboxError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("the read-only sandbox cannot run: the seccomp filter that keeps confined "), done
    assert done.stdout.count("\n") == 1 and "apt-get install libseccomp2" in done.stdout
    assert not marker.exists()


def test_a_dsh_home_named_through_a_link_in_the_workspace_is_not_replaced(base: Path) -> None:
    """``DSH_HOME=proj/.dsh``, a link to a home elsewhere: the link cannot be swapped for a home of the model's."""
    proj = base / "proj"
    (base / "real-home").mkdir(mode=0o700)
    (proj / ".dsh").symlink_to(base / "real-home")
    with pytest.raises(SandboxError) as caught:
        _run(_sandbox(base, home=proj / ".dsh"), "rm .dsh && mkdir -p .dsh/hooks && touch .dsh/hooks/claude.json", proj)
    assert f"but {proj}/.dsh is a symbolic link" in str(caught.value) and "\n" not in str(caught.value)
    assert (proj / ".dsh").is_symlink() and not (base / "real-home" / "hooks").exists()


def test_the_filters_descriptor_never_outlives_its_call(base: Path) -> None:
    """Run, refused, and interrupted before the spawn: this process's open descriptors stay as they were."""
    script = f"""
import os, signal
from dsh.bash import BashExecRequest, Interrupted, Interrupts
from dsh.bash_sandbox import SandboxError, SandboxExecutor
ok = SandboxExecutor(home={str(base / "dsh-home")!r})
bad = SandboxExecutor(home={str(base / "dsh-home")!r}, hide=({str(base / "nope")!r},))
request = BashExecRequest("true", cwd={str(base)!r}, workspace={str(base)!r})
ok.run_sync(request)
before = len(os.listdir("/proc/self/fd"))
for _ in range(5):
    assert ok.run_sync(request).exit_code == 0
    try:
        bad.run_sync(request)
    except SandboxError:
        pass
    with Interrupts([signal.SIGUSR1]) as interrupts:
        interrupts.caught = signal.SIGUSR1  # as a signal kept by a protected section leaves it
        try:
            ok.run_sync(request)
        except Interrupted:
            pass
print(before, len(os.listdir("/proc/self/fd")))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    counts = done.stdout.split()
    assert len(counts) == 2 and counts[0] == counts[1], done


def test_a_background_command_runs_behind_the_same_walls(base: Path, listener: tuple[Path, list[bytes]]) -> None:
    """``run_in_background`` starts through ``start()``: the same writable set and the same filter."""
    import asyncio

    path, heard = listener
    command = f"touch {base}/home/bg; {PYTHON} -c '{CONNECT}' {path}; touch started"
    request = BashExecRequest(command, cwd=str(base / "proj"), workspace=str(base / "proj"))

    async def main() -> tuple[int, str]:
        process = await _sandbox(base).start(request)
        status = await process.wait()
        return status, process.read()[1]

    status, stderr = asyncio.run(main())
    assert status == 0 and (base / "proj" / "started").exists(), stderr
    assert "Read-only file system" in stderr and "PermissionError" in stderr and heard == []
    assert not (base / "home" / "bg").exists()


def test_a_real_ssh_agent_does_not_answer_a_confined_call(base: Path) -> None:
    """The user's ssh-agent on a visible path: ``ssh-add -l`` works on the host, not in the sandbox."""
    if shutil.which("ssh-agent") is None:
        pytest.skip("needs OpenSSH's ssh-agent (apt-get install openssh-client)")
    sock = base / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            threading.Event().wait(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        host = subprocess.run(["ssh-add", "-l"], env=env, capture_output=True, text=True)
        assert host.returncode == 1 and "no identities" in host.stdout  # the agent answers on the host
        executor = _sandbox(base, "read-only", ambient=env)
        result = _run(executor, "ssh-add -l; echo status=$?", base / "proj")
        assert "status=2" in result.stdout and "no identities" not in result.stdout, result
        # The control: the same call with the agent's socket allowed reaches it (the variable did pass).
        allowed = _sandbox(base, "read-only", ambient=env, allow_unix_sockets=(str(sock),))
        assert "no identities" in _run(allowed, "ssh-add -l", base / "proj").stdout
    finally:
        agent.terminate()
        agent.wait(10)
