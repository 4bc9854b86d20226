"""The monorepo's shape: a PEP 420 namespace, typed leaf packages, one workspace."""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from tests.conftest import REPO

PACKAGES = sorted(p for p in (REPO / "packages").iterdir() if p.is_dir())


def test_no_distribution_ships_a_namespace_init() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for pkg in PACKAGES
        for p in (
            pkg / "src" / "dsh" / "__init__.py",
            pkg / "src" / "dsh" / "persistence" / "__init__.py",
            pkg / "src" / "dsh" / "models" / "__init__.py",
        )
        if p.exists()
    ]
    assert offenders == []


def test_every_leaf_package_is_typed_documented_and_built_from_src_dsh() -> None:
    for pkg in PACKAGES:
        meta = tomllib.loads((pkg / "pyproject.toml").read_text())
        assert meta["project"]["name"] == pkg.name
        assert meta["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/dsh"]
        assert meta["project"]["name"] != "dsh"
        readme = (pkg / "README.md").read_text()
        assert len(readme) > 400, f"{pkg.name} README is a stub"
        leaves = [d for d in (pkg / "src" / "dsh").rglob("*") if d.is_dir() and (d / "__init__.py").exists()]
        assert leaves, f"{pkg.name} has no package"
        for leaf in leaves:
            assert (leaf / "py.typed").exists(), f"{leaf} lacks py.typed"


def test_every_distribution_has_its_own_tests_folder_and_the_runners_see_them() -> None:
    """Unit tests live beside their distribution; pytest (all together) and the isolated runner find them."""
    for pkg in PACKAGES:
        tests = pkg / "tests"
        assert sorted(tests.glob("test_*.py")), f"{pkg.name} has no tests/test_*.py"
        # Not a package: with --import-mode=importlib two distributions may both hold test_model.py.
        assert not (tests / "__init__.py").exists(), f"{tests} must not be a package"
        assert not (tests / "conftest.py").exists(), f"{tests}: shared fixtures belong in dsh-testing"
        for source in tests.rglob("*.py"):
            imported = _imports(source) | {
                n.module or "" for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.ImportFrom)
            }
            assert not [m for m in imported if m == "tests" or m.startswith("tests.")], f"{source} imports tests.*"
    ini = (REPO / "pytest.ini").read_text()
    assert "testpaths = tests packages/*/tests" in ini and "--import-mode=importlib" in ini
    scripts = tomllib.loads((REPO / "hatch.toml").read_text())["envs"]["default"]["scripts"]["test"]
    assert "python scripts/test_isolated.py" in scripts and "pytest tests {args}" in scripts


def test_root_tests_hold_only_workspace_checks_and_integration() -> None:
    """A unit test of one distribution belongs in packages/<dist>/tests, where it runs alone."""
    folders = sorted(p.name for p in (REPO / "tests").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == ["data", "integration"]


def test_the_test_utility_is_never_a_runtime_dependency_and_needs_no_dsh() -> None:
    for pkg in PACKAGES:
        deps = _meta(pkg)["project"].get("dependencies", [])
        assert not [d for d in deps if d.startswith("dsh-testing")], f"{pkg.name} depends on dsh-testing"
    testing = _meta(REPO / "packages" / "dsh-testing")["project"]["dependencies"]
    assert [d for d in testing if d.startswith("dsh-")] == []


def test_the_test_utility_spells_the_managed_prefix_as_dsh_bash_owns_it() -> None:
    from dsh.bash import DSH_ENV_PREFIX
    from dsh.testing import _fixtures

    assert _fixtures._MANAGED_PREFIX == DSH_ENV_PREFIX


def test_hatch_workspace_covers_packages() -> None:
    config = tomllib.loads((REPO / "hatch.toml").read_text())
    assert config["envs"]["default"]["workspace"]["members"] == ["packages/*"]


def _readme_layers() -> list[tuple[str, str]]:
    """(distribution, module) rows of the root README's package table, in its order (the layers); a
    distribution with several top-level modules (dsh-cli: ``dsh.cli`` and its fence ``dsh.cli_fast``)
    gives a row for each."""
    rows = []
    for line in (REPO / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("[dsh-") and cells[1].startswith("`dsh."):
            dist = cells[0][1 : cells[0].index("]")]
            rows += [(dist, module) for module in re.findall(r"`(dsh\.[\w.]+)`", cells[1])]
    return rows


def _imports(source: Path) -> set[str]:
    """Top-level dsh modules (``dsh.core``, ``dsh.persistence.jsonl``) a source file imports."""
    found = set()
    for node in ast.walk(ast.parse(source.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            if name.startswith("dsh."):
                parts = name.split(".")
                found.add(".".join(parts[:3] if parts[1] in ("persistence", "models") else parts[:2]))
    return found


def test_the_readme_lists_every_distribution_in_layer_order() -> None:
    assert sorted(dict.fromkeys(d for d, _ in _readme_layers())) == [p.name for p in PACKAGES]


def test_imports_only_go_down_the_readme_layers() -> None:
    layers = _readme_layers()
    rank = {module: i for i, (_, module) in enumerate(layers)}
    for dist, module in layers:
        own = {m for d, m in layers if d == dist}
        for source in (REPO / "packages" / dist / "src").rglob("*.py"):
            for target in _imports(source) - own:
                assert target in rank, f"{source} imports {target}, which the README's table does not list"
                assert rank[target] < rank[module], f"{source} imports {target}, a layer above {module}"


def test_the_kernel_imports_only_stdlib_pydantic_and_paths() -> None:
    core = REPO / "packages" / "dsh-core" / "src" / "dsh" / "core"
    allowed = set(sys.stdlib_module_names) | {"pydantic", "dsh", "typing_extensions"}
    for source in core.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{source}: imports {name}"
                if name.startswith("dsh."):
                    assert name == "dsh.core" or name.split(".")[:2] == ["dsh", "paths"], f"{source}: imports {name}"


def test_the_kernel_stays_a_kernel() -> None:
    # Issue 22: fibers, effects, contexts, services, plugins and errors, well under 1,000 lines; a
    # product concern (the home key, the read-only mapping, the library log) lives with its users.
    core = REPO / "packages" / "dsh-core" / "src" / "dsh" / "core"
    lines = sum(len(source.read_text().splitlines()) for source in core.glob("*.py"))
    assert lines <= 900, f"dsh-core is {lines} lines: move what is not kernel to the layer that uses it"


def test_kernel_modules_import_each_other_without_a_cycle() -> None:
    core = REPO / "packages" / "dsh-core" / "src" / "dsh" / "core"
    graph: dict[str, set[str]] = {}
    for source in core.glob("_*.py"):
        tree = ast.parse(source.read_text())
        # Imports for annotations only (under `if TYPE_CHECKING:`) never run, so they make no cycle.
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
            for n in ast.walk(block)
        }
        graph[source.stem] = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and id(node) not in typing_only
        }
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for dep in graph.get(module, ()):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())


def test_the_postgres_driver_is_pinned_in_its_backend_and_nowhere_else() -> None:
    for pkg in PACKAGES:
        deps = tomllib.loads((pkg / "pyproject.toml").read_text())["project"]["dependencies"]
        drivers = {d.split("[")[0].split(">")[0].strip(): d for d in deps if d.startswith("psycopg")}
        if pkg.name == "dsh-persistence-postgres":
            assert sorted(drivers) == ["psycopg", "psycopg-pool"]
            assert drivers["psycopg"].startswith("psycopg[binary]"), "the binary wheel: no libpq build needed"
            assert all(">=" in d and "<" in d for d in drivers.values()), drivers
        else:
            assert drivers == {}, f"{pkg.name} depends on a PostgreSQL driver"
    # The backend sits at the persistence layer: it imports the session seam, never the agent.
    backend = REPO / "packages/dsh-persistence-postgres/src/dsh/persistence/postgres"
    sources = "\n".join(p.read_text() for p in backend.glob("*.py"))
    assert "dsh.session" in sources and "dsh.agent" not in sources and "dsh.bash" not in sources


def test_the_library_stands_apart_from_the_command() -> None:
    """Issue 40: the front door is dsh-harness's; nothing but the command itself needs dsh-cli."""
    layers = dict(_readme_layers())
    assert layers["dsh-harness"] == "dsh.harness"
    for pkg in PACKAGES:
        if pkg.name == "dsh-cli":
            continue
        deps = _meta(pkg)["project"].get("dependencies", [])
        assert not [d for d in deps if d.startswith("dsh-cli")], f"{pkg.name} depends on dsh-cli"
        for source in (pkg / "src").rglob("*.py"):
            assert not _imports(source) & {"dsh.cli", "dsh.cli_fast"}, f"{source} imports dsh.cli"
    mcp = [d.split("==")[0] for d in _meta(REPO / "packages" / "dsh-mcp")["project"]["dependencies"]]
    assert "dsh-harness" in mcp


def test_a_persistence_backend_is_imported_only_by_its_own_distribution() -> None:
    """Issue 40: everything else reaches a backend through the SessionPersistence seam (dsh.session.persistence).

    dsh-testing, the test utility (never a runtime dependency), may start a backend's test server.
    """
    for pkg in PACKAGES:
        for source in (pkg / "src").rglob("*.py"):
            for target in _imports(source):
                if target.startswith("dsh.persistence.") and pkg.name != "dsh-testing":
                    own = "dsh-persistence-" + target.split(".")[2]
                    assert pkg.name == own, f"{source} imports {target}; go through dsh.session.persistence"


_MODE_BITS = re.compile(r"\bS_IW(GRP|OTH)\b|\b0o0?(22|77|20|02)\b")


def test_one_trust_rule_judges_owner_and_mode() -> None:
    """Issue 40: owner and mode are judged by dsh.paths' trust rule (trust_fault) alone, never by one's own."""
    owner = REPO / "packages" / "dsh-paths" / "src" / "dsh" / "floor" / "_trust.py"
    for source in REPO.glob("packages/*/src/**/*.py"):
        if source != owner:
            found = _MODE_BITS.search(source.read_text())
            assert found is None, f"{source} tests the bits {found and found[0]}; ask dsh.paths.trust_fault"


_SETS_HANDLERS = ("signal.signal", "add_signal_handler", "remove_signal_handler", "set_wakeup_fd", "_signal.signal")


def test_one_module_sets_signal_handlers() -> None:
    """Issue 40: dsh.paths.signals sets every handler; only the fenced fast path keeps its own calls."""
    owner = REPO / "packages" / "dsh-paths" / "src" / "dsh" / "paths" / "signals.py"
    fence = REPO / "packages" / "dsh-cli" / "src" / "dsh" / "cli_fast"
    for source in REPO.glob("packages/*/src/**/*.py"):
        if source == owner or fence in source.parents:
            continue
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Call):
                called = ast.unparse(node.func)
                assert not called.endswith(_SETS_HANDLERS), (
                    f"{source}:{node.lineno} calls {called}; set handlers through dsh.paths.signals"
                )


def test_outside_the_fast_path_imports_are_ordinary() -> None:
    """Issue 40: no module ``__getattr__`` resolving exports lazily, and nothing asks ``sys.modules``
    whether asyncio is loaded: how a run is driven is its driver's to say (``dsh.bash.driven_blocking``)."""
    fence = REPO / "packages" / "dsh-cli" / "src" / "dsh" / "cli_fast"
    for source in REPO.glob("packages/*/src/**/*.py"):
        if fence in source.parents:
            continue
        text = source.read_text()
        name = str(source.relative_to(REPO))
        assert not re.search(
            r"""sys\.modules\b[^\n]{0,20}["']asyncio|["']asyncio["'] (not )?in sys\.modules""", text
        ), f"{name} asks sys.modules about asyncio; read dsh.bash.driven_blocking() (the driver's fact) instead"
        for node in ast.parse(text).body:
            assert not (isinstance(node, ast.FunctionDef) and node.name == "__getattr__"), (
                f"{name}:{node.lineno} resolves its exports lazily; import them, or make a public submodule "
                "of what a cold command must not load"
            )


def test_cli_exports_are_plain() -> None:
    """Issue 40: ``dsh.cli`` imports its exports as any package does (the fence is a package of its own)."""
    import dsh.cli

    source = (REPO / "packages" / "dsh-cli" / "src" / "dsh" / "cli" / "__init__.py").read_text()
    assert "__getattr__" not in source and "TYPE_CHECKING" not in source
    for name in dsh.cli.__all__:
        assert name in vars(dsh.cli), name


def test_a_clone_with_nothing_beside_it_collects_the_whole_suite(tmp_path: Path) -> None:
    """The suite carries its own data: a copy of the repository alone in a folder collects cleanly."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    clone = tmp_path / "alone" / "dsh"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    assert sorted(p.name for p in clone.parent.iterdir()) == ["dsh"], "the copy must stand alone"
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    assert " tests collected" in collected.stdout or " test collected" in collected.stdout


def test_internal_dependencies_are_pinned_to_the_release() -> None:
    """The distributions release together: each names its siblings at exactly their shared version."""
    versions = {meta["project"]["name"]: meta["project"]["version"] for meta in map(_meta, PACKAGES)}
    assert len(set(versions.values())) == 1, versions
    for pkg in PACKAGES:
        for requirement in _meta(pkg)["project"].get("dependencies", []):
            name = requirement.split("=")[0].split(">")[0].split("<")[0].strip()
            if name in versions:
                assert requirement == f"{name}=={versions[name]}", f"{pkg.name}: {requirement}"


def _meta(pkg: Path) -> dict[str, Any]:
    return tomllib.loads((pkg / "pyproject.toml").read_text())


_IMPORT_NAMES = {
    "yaml": "pyyaml",
    "psycopg_pool": "psycopg-pool",
    "tree_sitter": "tree-sitter",
    "tree_sitter_bash": "tree-sitter-bash",
}
"""Import names whose distribution is called otherwise."""

_NAMESPACE_IMPORTS = {
    "opentelemetry.sdk": "opentelemetry-sdk",
    "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry.proto": "opentelemetry-proto",
    "opentelemetry": "opentelemetry-api",
}
"""Namespace packages several distributions share: the longest matching prefix names the distribution."""


def _distribution_of(name: str) -> str:
    """The distribution an import of ``name`` needs (a namespace package's by its longest prefix)."""
    for prefix in sorted(_NAMESPACE_IMPORTS, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return _NAMESPACE_IMPORTS[prefix]
    top = name.split(".")[0]
    return _IMPORT_NAMES.get(top, top)


def test_every_distribution_declares_what_its_source_imports() -> None:
    """A direct import must be declared, even when a declared sibling happens to bring it along."""
    layers = dict((module, dist) for dist, module in _readme_layers())
    for pkg in PACKAGES:
        if pkg.name == "dsh-testing":
            continue  # its PostgreSQL fixture imports the backend only when installed, and skips otherwise
        declared = {re.match(r"[A-Za-z0-9_.-]+", r)[0].lower() for r in _meta(pkg)["project"]["dependencies"]}
        for source in (pkg / "src").rglob("*.py"):
            for target in _imports(source):
                dist = layers.get(target)
                assert dist in (pkg.name, *declared), f"{source} imports {target}; {pkg.name} does not declare {dist}"
            for node in ast.walk(ast.parse(source.read_text())):
                names = [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top == "dsh":
                        continue
                    wanted = _distribution_of(name)
                    assert wanted in declared, f"{source} imports {top}; {pkg.name} does not declare {wanted}"


def test_every_declared_third_party_dependency_is_imported() -> None:
    """A library a distribution no longer imports must leave its dependencies (installs stay small)."""
    for pkg in PACKAGES:
        if pkg.name == "dsh-testing":
            continue  # it declares the test tools (pytest, hypothesis) every distribution's tests run with
        declared = {re.match(r"[A-Za-z0-9_.-]+", r)[0].lower() for r in _meta(pkg)["project"]["dependencies"]}
        used = set()
        for source in (pkg / "src").rglob("*.py"):
            for node in ast.walk(ast.parse(source.read_text())):
                names = [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                used |= {_distribution_of(name) for name in names}
        unused = {d for d in declared if not d.startswith("dsh-")} - used
        assert not unused, f"{pkg.name} declares {sorted(unused)} but its source never imports them"


def test_every_exported_exception_is_drawn_in_its_package_s_errors_tree() -> None:
    """Each package's ``_errors`` docstring is the map of its exceptions, including those defined elsewhere."""
    import importlib

    checked = []
    for errors_file in sorted(REPO.glob("packages/*/src/dsh/**/_errors.py")):
        src = next(p for p in errors_file.parents if p.name == "src")
        name = ".".join(errors_file.parent.relative_to(src).parts)
        package, errors = importlib.import_module(name), importlib.import_module(f"{name}._errors")
        for export in package.__all__:
            value = getattr(package, export)
            if isinstance(value, type) and issubclass(value, BaseException):
                assert f"{export} " in (errors.__doc__ or ""), f"{name}._errors does not draw {export}"
                checked.append(export)
    assert {"EscapedError", "TranscriptNotSaved", "UsageError", "ToolError"} <= set(checked)


def _readme_commands() -> list[list[str]]:
    """The commands of the root README's "The two commands" block, each split at ``&&`` into words."""
    section = (REPO / "README.md").read_text().split("## The two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [[shlex.split(step) for step in line.split(" && ")] for line in lines]


def _ci_steps() -> list[list[str]]:
    """The one command ``.ci/run`` runs (beyond ``set`` and ``cd``), split at ``&&`` into words."""
    lines = [
        line
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert len(lines) == 1, f".ci/run runs more than the README's test command: {lines}"
    return [shlex.split(step.removeprefix("exec ")) for step in lines[0].split(" && ")]


def test_the_readmes_two_commands_are_the_ones_ci_and_the_venv_layout_use() -> None:
    """The README's set-up and test commands cannot drift from ``.ci/run`` (cheap: nothing is run)."""
    commands = _readme_commands()
    assert len(commands) == 2, f"the README's block holds {len(commands)} commands, not the set-up and the test"
    (venv, pip, *setup), (venv_again, pip_again, *test) = commands
    ci_venv, ci_pip, ci_test = _ci_steps()
    # Both start as CI starts: the clone's own .venv/ (git-ignored), Hatch installed into it.
    assert venv == venv_again == ci_venv == ["python3", "-m", "venv", ".venv"]
    assert ".venv/" in (REPO / ".gitignore").read_text().splitlines()
    assert pip == pip_again == ci_pip
    assert pip[0] == ".venv/bin/pip" and pip[1] == "install"
    # The test command is CI's last step, a script of the Hatch workspace.
    assert test == [ci_test], f"the README's test command {test} is not what .ci/run runs: {ci_test}"
    hatch, run, script = ci_test
    assert (hatch, run) == (".venv/bin/hatch", "run")
    assert script in tomllib.loads((REPO / "hatch.toml").read_text())["envs"]["default"]["scripts"]
    # The set-up command runs `dsh exec` through the same Hatch, on the built-in default deployment.
    ((*launcher, verb, separator, line),) = setup
    assert launcher == [hatch, run, "dsh"] and (verb, separator) == ("exec", "--")
    # `dsh` is dsh-cli's own script (no generated wrapper: it would import `re`), which runs the fence.
    cli = _meta(REPO / "packages" / "dsh-cli")
    assert "dsh" not in cli["project"].get("scripts", {})
    assert cli["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-scripts"] == {"scripts/dsh": "dsh"}
    script = (REPO / "packages" / "dsh-cli" / "scripts" / "dsh").read_text()
    assert script.endswith("from dsh.cli_fast import run\n\nrun()\n")
    table = {row.split("`")[1] for row in (REPO / "README.md").read_text().splitlines() if row.startswith("| `DSH_")}
    assert set(re.findall(r"\$(DSH_[A-Z_]+)", line)) <= table, "it shows only variables the README's table lists"
    assert "DSH_SESSION_JSONL" in line, "it shows where the default deployment's JSONL transcript is"


NOT_RECORDS = {
    # Slotted classes of dsh's sources that are not records, and why (the record rule, root README:
    # may a copy with the same fields stand in for it everywhere? No: it is state, or not a value).
    "dsh/agent/_observe.py:Span": "ended later: its end time, error and attributes are set when the work ends",
    "dsh/bash_env/_registry.py:_State": "the registry's shared state, behind a lock",
    "dsh/bash_env/_resolve.py:Entry": "a contributor with its lock, thread pool and running resolves",
    "dsh/bash_env/_resolve.py:Call": "one collect in progress: futures, outcomes taken so far",
    "dsh/bash_env/_resolve.py:Snapshot": "a mapping that must be a dict (a call's env), carrying warnings",
    "dsh/bash_ssh/_ssh.py:_Pooled": "a pooled connection and the count of commands it carries now",
    "dsh/cli/_sessions_cmd.py:Verdict": "filled in as the checks run",
    "dsh/core/_context.py:Context": "a plugin's handle on its fiber: behaviour, no data of its own",
    "dsh/core/_fiber.py:Effect": "a registration that is disposed once; fibers key effects by identity",
    "dsh/core/_services.py:ServiceKey": "a typed name: as a tuple it would iterate (inject=KEY would pass for "
    "inject=(KEY,)) and equal ('db',)",
    "dsh/core/_services.py:_Entry": "a registration, removed only by its own disposer (compared with `is`)",
    "dsh/core/_services.py:Registry": "values registered and removed as plugins load and unload",
    "dsh/hooks/_transcript.py:_Lines": "a view's chain end and announced tool ids, advanced line by line",
    "dsh/hooks/_transcript.py:_View": "how far a view was written, updated as events are appended",
    "dsh/loader/_contain.py:_Wrapper": "an installed signal handler, told apart from others with `is`",
    "dsh/loader/_contain.py:_Watch": "counts signals while armed",
    "dsh/loader/_contain.py:_Containment": "a context manager holding the watch it armed",
    "dsh/loader/_discovery.py:_Scan": "filled in while scanning",
    "dsh/session/_empty.py:ReadOnlyDict": "a mapping that must be a dict (json and `|` take it as one)",
    "dsh/tool_bash/_tool.py:TaskTable": "background tasks started and finished while the tool lives",
}
"""Every slotted or bare class of ``packages/*/src`` that is not a checked record, and why; the fenced
fast path (``dsh/cli_fast/``) keeps its own. A new one is a record (make it a NamedTuple) or is
added here with its reason."""

TYPED_DICTS = {"dsh/session/events.py"}
"""Where a ``TypedDict`` may be defined: the keys of the JSON objects dsh publishes (an event's ``data``)."""


def _module(source: Path) -> str:
    return source.as_posix().split("/src/", 1)[1]


def _bases(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(base.value if isinstance(base, ast.Subscript) else base) for base in node.bases]


def test_every_record_dsh_defines_is_a_named_tuple() -> None:
    """The record rule (root README, issues 22 and 40): one kind of record class in dsh's own sources.

    No dataclass and no pydantic model (pydantic is the bridge that reads files into NamedTuples);
    a ``TypedDict`` only where published JSON objects are typed; and every class with ``__slots__``, or
    of a record's shape without being one (no base, nothing but attributes and dunder methods), either
    a checked record (``__slots__ = ()`` on a NamedTuple of its module) or in :data:`NOT_RECORDS` with
    why it is state.
    """
    listed = set()
    for source in REPO.glob("packages/*/src/**/*.py"):
        module = _module(source)
        tree = ast.parse(source.read_text())
        classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        named_tuples = {node.name for node in classes if "NamedTuple" in _bases(node)}
        for node in classes:
            where = f"{source}: class {node.name}"
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                assert ast.unparse(target).split(".")[-1] != "dataclass", (
                    f"{where} is a dataclass; dsh's records are NamedTuples (root README)"
                )
            bases = [base.split(".")[-1] for base in _bases(node)]
            assert not {"BaseModel", "RootModel"} & set(bases), (
                f"{where} is a pydantic model; dsh's records are NamedTuples, read from a file with "
                "dsh.loader.validation.validate_named_tuple (root README)"
            )
            assert "TypedDict" not in bases or module in TYPED_DICTS, (
                f"{where} is a TypedDict; a record is a NamedTuple, and only {sorted(TYPED_DICTS)} types "
                "published JSON objects with TypedDicts (root README)"
            )
            slots = [
                statement.value
                for statement in node.body
                if isinstance(statement, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in statement.targets)
            ]
            if module.startswith("dsh/cli_fast/") or not (slots or _carries_data(node)):
                continue
            if slots and ast.literal_eval(slots[0]) == () and named_tuples & set(bases):
                continue  # a checked record: a private NamedTuple of the fields and a public subclass
            listed.add(f"{module}:{node.name}")
            assert f"{module}:{node.name}" in NOT_RECORDS, (
                f"{where} is a slotted or bare class, not a checked record: if it carries data (fields set "
                "once, no identity), make it a typing.NamedTuple; if it is state, add it to NOT_RECORDS with why "
                "(root README)"
            )
    assert listed == set(NOT_RECORDS), f"NOT_RECORDS names classes that are gone: {sorted(set(NOT_RECORDS) - listed)}"


def _carries_data(node: ast.ClassDef) -> bool:
    """A class of no base (``Generic`` aside) whose body is only attributes and dunder methods: a record's shape."""
    if any(base != "Generic" for base in _bases(node)):
        return False
    return all(
        isinstance(statement, ast.Expr | ast.Assign | ast.AnnAssign)
        or (isinstance(statement, ast.FunctionDef) and statement.name[:2] == statement.name[-2:] == "__")
        for statement in node.body
    )


def test_modules_that_define_records_evaluate_their_annotations() -> None:
    """The record rule's cost (root README): a record module has no ``from __future__ import annotations``.

    ``typing.NamedTuple`` compiles every string annotation into a ``ForwardRef`` as the class is made,
    which is most of what defining a record costs on a cold command's path.
    """
    for source in REPO.glob("packages/*/src/**/*.py"):
        tree = ast.parse(source.read_text())
        records = [
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and any(ast.unparse(base).endswith("NamedTuple") for base in node.bases)
        ]
        deferred = any(
            isinstance(node, ast.ImportFrom)
            and node.module == "__future__"
            and any(alias.name == "annotations" for alias in node.names)
            for node in tree.body
        )
        assert not (records and deferred), (
            f"{source} defines the records {records} and defers its annotations: drop `from __future__ import "
            "annotations` and quote only the names that exist for type checkers or later in the module"
        )


def test_the_readmes_shortcut_past_hatch_run_starts_the_workspace_dsh() -> None:
    """`hatch run` costs ~0.4 s a command; the README's shortcut puts the environment's bin/ on PATH.
    The suite runs in that environment (`hatch env find` names it): its `dsh` must be there and start."""
    section = (REPO / "README.md").read_text().split("## The two commands", 1)[1].split("\n## ", 1)[0]
    assert 'export PATH="$(.venv/bin/hatch env find)/bin:$PATH"' in section
    script = Path(sys.prefix) / "bin" / "dsh"
    assert script.is_file(), f"{script} is missing: the Hatch environment has no dsh script"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "dsh-cli 0.1.0" in done.stdout.splitlines(), done.stdout + done.stderr


def test_no_document_installs_a_dsh_distribution_from_an_index() -> None:
    """The dsh-* names are on no index (someone else may register them): every ``pip install`` of one
    in a documented command block reads the wheels built from a clone (``--no-index``)."""
    names = {pkg.name for pkg in PACKAGES}
    offenders = []
    for doc in sorted(REPO.glob("**/*.md")):
        if any(part.startswith(".") for part in doc.relative_to(REPO).parts):
            continue  # .venv/, .venvs/: installed third-party files
        for block in re.findall(r"^```[a-z]*\n(.*?)^```", doc.read_text(), re.S | re.M):
            for command in re.findall(r"pip install [^#\n]*", block):
                if set(command.split()) & names and "--no-index" not in command:
                    offenders.append(f"{doc.relative_to(REPO)}: {command.strip()}")
    assert offenders == []
