"""Cold commands import only what they use (issue 14: a cold ``dsh`` within 6x ``python -c pass``).

Each verb runs in a fresh interpreter through the real entry point (``dsh.cli_fast._client.main``,
what ``python -m dsh.cli`` and the ``dsh`` script run), on the default deployment in an empty
home; a wrapper then prints which heavy modules ended up in ``sys.modules``. pydantic stays the
validator of configs, deployment files and scripts, and dsh-loader alone validates and scans on every
call; a cold command skips them through the start-up memos its fence hands the loader
(``dsh.cli_fast._memos``: ``<home>/run/discovery.cache`` and ``validated.cache``), so pydantic and yaml
load only for a file or config not seen before, ``importlib.metadata`` only when the installed
distributions changed since the last command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

WRAPPER = """
import json, sys
from dsh.cli_fast._client import main

code = main(sys.argv[2:])
sys.stdout.flush()
print(json.dumps({"code": code, "loaded": [m for m in json.loads(sys.argv[1]) if m in sys.modules]}), file=sys.stderr)
"""

NEVER_LOADED = (
    "asyncio",
    "concurrent.futures",
    "ssl",
    "pydantic",
    "importlib.metadata",
    "yaml",
    # What only a hook's env file (tempfile, shutil with its archive modules) or a misspelt matcher
    # (difflib) needs: 12 M instructions of a cold `dsh exec` that has neither (benchmarks README).
    "tempfile",
    "shutil",
    "difflib",
    # What runs a hook (the runner, its processes and env files): the hooks plugin builds it only once a
    # table holds a hook (dsh.hooks._hooks). An installed dialect's module may load the stages its
    # contract names (dsh.hooks.dialect: payloads, selection, decisions), as dsh-hooks-gemini's does here.
    "dsh.hooks._service",
    "dsh.hooks._process",
    "dsh.hooks._envfile",
)
"""Modules a cold verb must not import on the default deployment when no configured hook needs them."""


def _cold(home: Path, *args: str, watched: tuple[str, ...] = NEVER_LOADED) -> tuple[int, list[str], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_DEPLOYMENT", "DSH_SESSION_ID")}
    env["DSH_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps(watched), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    *lines, last = done.stderr.splitlines()
    report = json.loads(last)
    return report["code"], report["loaded"], done.stdout


VERBS = [("exec", "--no-server", "--", "true"), ("env",), ("plugins",), ("sessions", "list")]


@pytest.mark.parametrize("verb", VERBS, ids=[" ".join(v[:2]) for v in VERBS])
def test_a_cold_verb_on_the_default_deployment_imports_none_of_the_heavy_modules(
    tmp_path: Path, verb: tuple[str, ...]
) -> None:
    home = tmp_path / "home"
    _cold(home, "env")  # the first command in a home scans the distributions and writes the cache
    code, loaded, _ = _cold(home, *verb, watched=NEVER_LOADED)
    assert code == 0
    assert loaded == []


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_a_cold_exec_new_or_resumed_writes_and_reads_its_transcript_without_the_heavy_modules(
    tmp_path: Path, backend: str
) -> None:
    """A new session's first flush, and a resumed one's header, last turn and next flush."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    deployment = home / "store.yaml"
    deployment.write_text(f"persistence: {{backend: {backend}}}\n")
    deployment.chmod(0o600)
    line = ("exec", "--no-server", "--deployment", str(deployment), "--json")
    watched = NEVER_LOADED
    assert _cold(home, *line, "--", "true")[0] == 0  # the first command validates the file and caches its form
    code, loaded, out = _cold(home, *line, "--", "echo first", watched=watched)
    assert (code, loaded) == (0, [])
    session = json.loads(out)["session_id"]
    code, loaded, out = _cold(home, *line, "--session", session, "--", 'echo "$DSH_SESSION_ID"', watched=watched)
    assert (code, loaded) == (0, [])
    assert json.loads(out)["stdout"] == f"{session}\n"
    code, _, out = _cold(home, "sessions", "show", session, "--deployment", str(deployment))
    assert code == 0 and "echo first" in out and 'echo "$DSH_SESSION_ID"' in out


@pytest.mark.parametrize(
    "text",
    [
        "persistence: {backend: sqlite}\n",
        # bash-env's config leaves its mapping field (policy) at its read-only empty default
        "plugins:\n  - {id: bash-env, config: {exclude: [nothing-installed]}}\n",
    ],
    ids=["readme-sqlite", "bash-env-exclude"],
)
def test_a_cold_exec_with_the_readmes_deployment_file_imports_none_of_the_heavy_modules(
    tmp_path: Path, text: str
) -> None:
    """Issue 22: a deployment file costs what the built-in deployment costs. Its validated form is
    cached (no yaml, no pydantic from the second command on), and the ``DSH_DEPLOYMENT`` fact it adds
    (bash-env's built-in) resolves inline (no thread pool, so no ``concurrent.futures``)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    deployment = home / "sqlite.yaml"
    deployment.write_text(text)
    deployment.chmod(0o600)
    line = ("exec", "--no-server", "--deployment", str(deployment), "--", 'test -n "$DSH_DEPLOYMENT"')
    assert _cold(home, *line)[0] == 0  # the first command validates the file and caches its form
    code, loaded, _ = _cold(home, *line, watched=(*NEVER_LOADED, "socket"))
    assert code == 0
    assert loaded == []


def test_one_discovery_cache_serves_the_dsh_script_and_python_m_from_any_folder(tmp_path: Path) -> None:
    """``python -m`` puts the working directory first on ``sys.path``, the script its own folder: a
    folder without distribution metadata is not part of the cache's key, so no form or folder rescans."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_DEPLOYMENT", "DSH_SESSION_ID")}
    env |= {"DSH_HOME": str(home), "PYTHONPROFILEIMPORTTIME": "1"}
    script = Path(sys.executable).with_name("dsh")
    forms = [[sys.executable, "-m", "dsh.cli", "env"]] * 3 + ([[str(script), "env"]] if script.exists() else [])
    scanned = []
    for i, argv in enumerate(forms):
        folder = tmp_path / f"cwd-{i}"
        folder.mkdir()
        done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=True)
        scanned.append(any(line.endswith("| importlib.metadata") for line in done.stderr.splitlines()))
    assert scanned == [True] + [False] * (len(forms) - 1)


def test_two_spellings_of_the_interpreter_share_one_home_without_validating_again(tmp_path: Path) -> None:
    """pip writes the ``dsh`` script's shebang as ``python3`` (or ``python3.11``), ``python -m dsh.cli``
    runs ``python``: one interpreter. Taking turns with one deployment file in one home, only the
    first command validates it; before, each threw the other's forms away (yaml and pydantic every time)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    deployment = home / "sqlite.yaml"
    deployment.write_text("persistence: {backend: sqlite}\n")
    deployment.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_DEPLOYMENT", "DSH_SESSION_ID")}
    env |= {"DSH_HOME": str(home), "DSH_DEPLOYMENT": str(deployment), "PYTHONPROFILEIMPORTTIME": "1"}
    spellings = [Path(sys.executable)]
    for name in ("python3", "python3.11", "python"):
        other = Path(sys.executable).with_name(name)
        if other.exists() and other != spellings[0] and os.path.samefile(other, sys.executable):
            spellings.append(other)
            break
    else:  # a link of our own elsewhere would start the base interpreter, outside this environment
        pytest.skip(f"no second name of {sys.executable} beside it (a --copies venv)")
    validated = []
    for python in [*spellings, *spellings]:
        done = subprocess.run(
            [str(python), "-m", "dsh.cli", "exec", "--no-server", "--", "true"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        validated.append(any(line.endswith("| yaml") for line in done.stderr.splitlines()))
    assert validated == [True, False, False, False]


def test_the_fence_imports_only_the_standard_library_dsh_floor_and_itself() -> None:
    """Start-up tricks live in ``dsh.cli_fast`` alone, and it reaches nothing above dsh-paths but where the
    fast path ends: the one parser and the in-process dispatch, imported by the functions that hand over."""
    import ast

    import dsh.cli_fast as fast

    folder = Path(fast.__file__).parent
    repo = folder.parents[4]
    handed_over = {"dsh.cli._cli", "dsh.cli._parser"}
    for source in folder.glob("*.py"):
        tree = ast.parse(source.read_text())
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("dsh."):
                assert node.module in ("dsh.floor", "dsh.paths", *handed_over), f"{source.name} imports {node.module}"
                assert node.module not in handed_over or id(node) not in top_level, f"{source.name}: at import time"
            if isinstance(node, ast.Import):
                assert not [a.name for a in node.names if a.name.startswith("dsh.")], source.name
    tricks = [
        str(p.relative_to(repo))
        for p in repo.glob("packages/*/src/dsh/**/*.py")
        if "TYPE_CHECKING = False" in p.read_text() and folder not in p.parents
    ]
    assert tricks == [], f"start-up tricks outside the fence: {tricks}"


HOOK_MACHINERY = ("asyncio", "concurrent.futures", "ssl")
"""What running a hook needs, and a loaded hooks plugin with no hook for the turn must not import."""


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"hooks": {}},
        {"hooks": {"Notification": [{"hooks": [{"type": "command", "command": "exit 2"}]}]}},
        {"disableAllHooks": True, "hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "exit 2"}]}]}},
    ],
    ids=["empty-file", "no-hooks", "only-an-event-exec-never-fires", "all-disabled"],
)
def test_the_hooks_plugin_without_a_hook_for_the_turn_imports_no_asyncio(
    tmp_path: Path, config: dict[str, object]
) -> None:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    (home / "hooks" / "claude.json").write_text(json.dumps(config))
    listed = _cold(home, "plugins")[2].splitlines()
    assert [line.split()[-1] for line in listed if line.split()[1:2] == ["hooks"]] == ["active"]
    # pydantic may load (a non-empty plugin config is validated); what hooks would need must not
    code, loaded, out = _cold(home, "exec", "--no-server", "--", "echo ran", watched=HOOK_MACHINERY)
    assert (code, out, loaded) == (0, "ran\n", [])


def test_a_configured_hook_brings_asyncio_and_still_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    seen = tmp_path / "seen"
    hook = {"type": "command", "command": f"cat > {seen}"}
    (home / "hooks" / "claude.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    code, loaded, out = _cold(home, "exec", "--no-server", "--", "echo ran")
    assert (code, out) == (0, "ran\n")
    assert "asyncio" in loaded and json.loads(seen.read_text())["hook_event_name"] == "PreToolUse"


DATACLASSES_WRAPPER = """
import dataclasses, json, sys
from dsh.cli_fast._client import main

code = main(sys.argv[1:])
sys.stdout.flush()
defined = sorted(
    f"{name}.{cls.__qualname__}"
    for name, module in list(sys.modules.items())
    if name.startswith("dsh.")
    for cls in vars(module).values()
    if isinstance(cls, type) and cls.__module__ == name and dataclasses.is_dataclass(cls)
)
print(json.dumps({"code": code, "defined": defined}), file=sys.stderr)
"""

MAX_COLD_DATACLASSES = 0
"""Dataclasses a cold ``dsh exec`` may define: none. Each costs about half a millisecond (one ``exec``
per generated method); every record dsh defines is a ``NamedTuple`` (the record rule, issue 22: the
plugins' ``Config`` classes, the deployment records, ``ToolCall``...) or a plain class."""


def test_a_cold_exec_defines_no_dataclass(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _cold(home, "env")  # the discovery cache, as every later command finds it
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_DEPLOYMENT", "DSH_SESSION_ID")}
    env["DSH_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", DATACLASSES_WRAPPER, "exec", "--no-server", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stderr.splitlines()[-1])
    assert report["code"] == 0
    defined = report["defined"]
    assert len(defined) <= MAX_COLD_DATACLASSES, f"a cold dsh exec defines {len(defined)} dataclasses: {defined}"
