"""The command's validation memo (``<home>/run/validated.cache``): a deployment file or plugin config read
before costs no yaml or pydantic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh.cli._open import MEMOS, RECORDS
from dsh.cli_fast._memos import ValidatedForms, environment_key
from dsh.loader import Catalog, DeploymentError, ModelChoice, PersistenceChoice, PluginEntry, load_deployment

PLUGIN_TAIL = """
name = "acme"
seen = []

def apply(ctx, config):
    seen.append(config)

import sys
plugin = sys.modules[__name__]
"""

NAMED_TUPLE_PLUGIN = (
    """
from typing import NamedTuple

class _Config(NamedTuple):
    region: str
    retries: int = 1
    tags: tuple[str, ...] = ()

class Config(_Config):
    __slots__ = ()

    def __new__(cls, region, retries=1, tags=()):
        if retries > 5:
            raise ValueError("retries over 5")
        return super().__new__(cls, region, retries, tags)
"""
    + PLUGIN_TAIL
)

PLUGIN = """
from dataclasses import dataclass, field

@dataclass(frozen=True, kw_only=True)
class Config:
    region: str
    retries: int = 1
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.retries > 5:
            raise ValueError("retries over 5")

name = "acme"
seen = []

def apply(ctx, config):
    seen.append(config)

import sys
plugin = sys.modules[__name__]
"""

PROBE = """
import json, sys
from pathlib import Path
from dsh.cli._open import MEMOS
from dsh.loader import Catalog, compose, load_deployment

home, path = Path(sys.argv[1]), sys.argv[2]
catalog = Catalog(MEMOS.entry_points(home))
cache = MEMOS.validation(home, catalog)
deployment = load_deployment(path, validated=cache)
# compose, not boot: this distribution's tests have no persistence backend installed to boot with
with compose(deployment, catalog=catalog, validated=cache, env={"DSH_HOME": str(home)}) as runtime:
    if runtime.entries["acme"].error:
        sys.exit(runtime.entries["acme"].error)
    import acme_plugin
    config = acme_plugin.seen[-1]
print(json.dumps({
    "config": [
        config.region, config.retries, list(config.tags), type(config).__mro__[1].__name__, type(config.tags).__name__
    ],
    "loaded": [m for m in ("yaml", "pydantic") if m in sys.modules],
}))
"""


@pytest.fixture(params=["dataclass", "namedtuple"])
def home(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A home, and the ``acme`` plugin with a dataclass or a (checked) NamedTuple ``Config``."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    (tmp_path / "acme_plugin.py").write_text(PLUGIN if request.param == "dataclass" else NAMED_TUPLE_PLUGIN)
    return home


def _kind(home: Path) -> list[str]:
    """What the probe reports of the config's class: its first base's name and the type of ``tags``."""
    if "NamedTuple" in (home.parent / "acme_plugin.py").read_text():
        return ["_Config", "tuple"]
    return ["object", "list"]


def _probe(home: Path, deployment: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(home.parent), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(home), str(deployment)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _deployment(home: Path, text: str) -> Path:
    path = home.parent / "deployment.yaml"
    path.write_text(text)
    return path


ONE_ENTRY = "plugins:\n  - {id: acme, name: 'acme_plugin:plugin', config: {region: eu-1, tags: [a, b]}}\n"


def test_a_second_cold_run_with_the_same_file_imports_neither_yaml_nor_pydantic(home: Path) -> None:
    path = _deployment(home, ONE_ENTRY)
    first = _probe(home, path)
    assert first == {"config": ["eu-1", 1, ["a", "b"], *_kind(home)], "loaded": ["yaml", "pydantic"]}
    second = _probe(home, path)  # the cached form rebuilds the same class, a tuple field as a tuple
    assert second == {"config": ["eu-1", 1, ["a", "b"], *_kind(home)], "loaded": []}
    assert (home / "run" / "validated.cache").stat().st_mode & 0o777 == 0o600


def test_any_edit_of_the_file_is_validated_again(home: Path) -> None:
    path = _deployment(home, ONE_ENTRY)
    _probe(home, path)
    path.write_text(path.read_text().replace("eu-1", "eu-2"))
    assert _probe(home, path) == {"config": ["eu-2", 1, ["a", "b"], *_kind(home)], "loaded": ["yaml", "pydantic"]}
    path.write_text(path.read_text().replace("region: eu-2", "region: eu-2, prio: 2"))
    with pytest.raises(AssertionError, match="prio"):
        _probe(home, path)  # a typo is refused on every run, cached form or not


def test_a_cache_file_someone_else_could_write_is_never_believed(home: Path) -> None:
    path = _deployment(home, "persistence: {backend: sqlite}\n")
    cached = home / "run" / "validated.cache"
    catalog = Catalog()
    key = environment_key(catalog.fingerprint)
    cache = ValidatedForms(str(cached), key, RECORDS)
    load_deployment(path, validated=cache)
    cache.save()
    # Another user's doctored form: the file says the deployment is jsonl.
    forged = json.loads(cached.read_text())
    (entry,) = forged["environments"][0]["deployments"].values()
    entry["deployment"]["persistence"]["backend"] = "forged"
    cached.write_text(json.dumps(forged))
    cached.chmod(0o664)  # the group could have written it: dsh-paths' one trust rule refuses it
    assert load_deployment(path, validated=ValidatedForms(str(cached), key, RECORDS)).persistence.backend == "sqlite"
    cached.chmod(0o600)
    assert load_deployment(path, validated=ValidatedForms(str(cached), key, RECORDS)).persistence.backend == "forged"
    # ... which is why only a file no one else can write is believed: such a file of our own is our own word.
    assert (
        load_deployment(path, validated=ValidatedForms(str(cached), "another key", RECORDS)).persistence.backend
        == "sqlite"
    )


def test_a_form_the_config_class_refuses_now_is_validated_afresh(home: Path) -> None:
    catalog = Catalog()
    cache = MEMOS.validation(home, catalog)

    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Config:
        retries: int

        def __post_init__(self) -> None:
            if self.retries > 5:
                raise ValueError("retries over 5")

    calls: list[int] = []

    def validate() -> Config:
        calls.append(1)
        return Config(retries=3)

    assert cache.config("ref", Config, {"retries": 3}, validate) == Config(3)
    assert cache.config("ref", Config, {"retries": 3}, validate) == Config(3)
    assert calls == [1]  # the second answer came from the cache
    cache._configs[next(iter(cache._configs))] = {
        "fields": {"retries": 9},
        "tuples": [],
    }  # a stale form __post_init__ refuses
    assert cache.config("ref", Config, {"retries": 3}, validate) == Config(3)
    assert calls == [1, 1]


def test_an_invalid_file_is_still_an_error_naming_the_file(home: Path) -> None:
    path = _deployment(home, "persistence: {backend: ''}\n")
    cache = MEMOS.validation(home, Catalog())
    with pytest.raises(DeploymentError, match=r"deployment\.yaml"):
        load_deployment(path, validated=cache)


def test_a_config_leaving_a_mapping_field_at_its_read_only_default_is_cached(tmp_path: Path) -> None:
    """A NamedTuple ``Config`` whose mapping field defaults to ``EMPTY_MAPPING`` (the record rule) is
    cached like any other, and the field comes back as that very default, never a mutable ``{}``."""
    from collections.abc import Mapping
    from typing import NamedTuple

    from dsh.session import EMPTY_MAPPING

    class Config(NamedTuple):
        exclude: tuple[str, ...] = ()
        policy: Mapping[str, str] = EMPTY_MAPPING

    calls: list[int] = []

    def validate() -> Config:
        calls.append(1)
        return Config(exclude=("a",))

    home = tmp_path / "home"
    (home / "run").mkdir(parents=True, mode=0o700)
    catalog = Catalog()
    cache = MEMOS.validation(home, catalog)
    assert cache.config("ref", Config, {"exclude": ["a"]}, validate) == Config(("a",))
    cache.save()
    again = MEMOS.validation(home, catalog).config("ref", Config, {"exclude": ["a"]}, validate)
    assert calls == [1]  # the second process's answer came from the cache
    assert again == Config(("a",)) and again.policy is EMPTY_MAPPING and type(again.exclude) is tuple


@pytest.mark.parametrize(
    "doctor",
    [
        lambda form: form["plugins"][0].update(name=5),
        lambda form: form.update(dsh_home=5),
        lambda form: form.update(model={"provider": 3}),
        lambda form: form.update(persistence=[]),
    ],
    ids=["entry-name", "dsh-home", "model-provider", "persistence-list"],
)
def test_a_cached_deployment_form_of_the_wrong_types_is_validated_afresh(
    tmp_path: Path, doctor: Callable[[dict[str, Any]], None]
) -> None:
    """The cache is never fatal: a form that no longer builds (any error) is read from the file again."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True, mode=0o700)
    path = _deployment(home, "model: {provider: openai}\nplugins:\n  - {id: bash-env}\n")
    catalog = Catalog()
    cache = MEMOS.validation(home, catalog)
    expected = load_deployment(path, validated=cache)
    cache.save()
    cached = home / "run" / "validated.cache"
    data = json.loads(cached.read_text())
    doctor(next(iter(data["environments"][0]["deployments"].values()))["deployment"])
    cached.write_text(json.dumps(data))
    assert load_deployment(path, validated=MEMOS.validation(home, catalog)) == expected


def test_a_deployment_holding_a_value_json_cannot_is_loaded_and_not_cached(tmp_path: Path) -> None:
    """A YAML date in a config is not JSON: the file is read, validated each time, never a traceback."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True, mode=0o700)
    path = _deployment(home, "persistence: {backend: jsonl, config: {since: 2024-01-01}}\n")
    for _ in range(2):
        cache = MEMOS.validation(home, Catalog())
        assert str(load_deployment(path, validated=cache).persistence.config["since"]) == "2024-01-01"
        cache.save()


def test_environments_sharing_a_home_keep_their_own_forms(tmp_path: Path) -> None:
    cached = tmp_path / "run" / "validated.cache"
    cached.parent.mkdir(mode=0o700)
    path = tmp_path / "deployment.yaml"
    path.write_text("persistence: {backend: sqlite}\n")
    validations: list[str] = []

    def load(key: str) -> str:
        cache = ValidatedForms(str(cached), key, RECORDS)
        text = path.read_text()
        validate = lambda: (validations.append(key), load_deployment(path))[1]  # noqa: E731
        backend = cache.deployment(str(path), text, validate).persistence.backend
        cache.save()
        return backend

    # Two virtual environments used in turn from one home: each validates once, then both hit.
    for key in ("venv-a", "venv-b", "venv-a", "venv-b"):
        assert load(key) == "sqlite"
    assert validations == ["venv-a", "venv-b"]
    # The file keeps the newest eight environments: a ninth drops the oldest, venv-a.
    for n in range(7):
        load(f"venv-{n}")
    load("venv-a")
    assert validations[-1] == "venv-a"
    load("venv-b")
    assert validations[-1] == "venv-b"  # seven newer ones and venv-a pushed it out
    assert len(json.loads(cached.read_text())["environments"]) == 8


def test_a_field_the_file_gave_is_kept_even_when_it_equals_the_default(tmp_path: Path) -> None:
    """``port: 22`` is the file's word: a later default of 2222 (a plugin edited in place) must not
    replace it, though the small int 22 is the very object the old default was."""
    from typing import NamedTuple

    class Old(NamedTuple):
        port: int = 22
        host: str = "a"

    class New(NamedTuple):  # the same fields and annotations: the same cache entry
        port: int = 2222
        host: str = "a"

    New.__qualname__ = Old.__qualname__
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True, mode=0o700)
    catalog = Catalog()
    cache = MEMOS.validation(home, catalog)
    cache.config("ref", Old, {"port": 22}, lambda: Old(port=22))
    cache.save()
    again = MEMOS.validation(home, catalog).config("ref", New, {"port": 22}, lambda: New(port=22))
    assert again == New(port=22, host="a")


def _bloated() -> str:
    from dsh.cli_fast._memos import MAX_CACHE_BYTES

    pad = "a" * (MAX_CACHE_BYTES + 1)
    return json.dumps({"format": "dsh validated cache 4", "environments": [{"key": "x", "pad": pad}]})


@pytest.mark.parametrize(
    "planted",
    [lambda: "[" * 100_000, _bloated],  # nested past the JSON parser's recursion; over the size limit
    ids=["nested", "bloated"],
)
def test_a_cache_it_cannot_read_is_ignored_and_rewritten_small(tmp_path: Path, planted: Callable[[], str]) -> None:
    cached = tmp_path / "run" / "validated.cache"
    cached.parent.mkdir(mode=0o700)
    cached.write_text(planted())
    cached.chmod(0o600)
    path = tmp_path / "deployment.yaml"
    path.write_text("persistence: {backend: sqlite}\n")
    cache = ValidatedForms(str(cached), "key", RECORDS)
    assert load_deployment(path, validated=cache).persistence.backend == "sqlite"
    cache.save()
    assert json.loads(cached.read_text())["environments"][0]["key"] == "key"
    assert cached.stat().st_size < 10_000, "nothing of the planted file is carried over"


def test_a_save_that_would_pass_the_limit_drops_other_environments_then_old_forms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dsh.cli_fast._memos as validated

    cached = tmp_path / "run" / "validated.cache"
    cached.parent.mkdir(mode=0o700)

    def load(key: str, name: str) -> None:
        path = tmp_path / name
        path.write_text(f"persistence: {{backend: sqlite}}\n# {'x' * 2000}\n")
        cache = ValidatedForms(str(cached), key, RECORDS)
        load_deployment(path, validated=cache)
        cache.save()

    for key in ("old-venv", "new-venv"):
        for n in range(4):
            load(key, f"{key}-{n}.yaml")
    assert [e["key"] for e in json.loads(cached.read_text())["environments"]] == ["new-venv", "old-venv"]
    monkeypatch.setattr(validated, "MAX_CACHE_BYTES", cached.stat().st_size)
    load("new-venv", "newest.yaml")  # one more form: the file no longer fits with old-venv's section
    kept = json.loads(cached.read_text())["environments"]
    assert [e["key"] for e in kept] == ["new-venv"] and len(kept[0]["deployments"]) == 5
    monkeypatch.setattr(validated, "MAX_CACHE_BYTES", 6_000)
    load("new-venv", "latest.yaml")  # this environment's own oldest forms go, the newest stays
    kept = json.loads(cached.read_text())["environments"]
    assert cached.stat().st_size <= 6_000 and str(tmp_path / "latest.yaml") in kept[0]["deployments"]


def test_a_cached_deployment_keeps_its_model_and_every_record_s_type(tmp_path: Path) -> None:
    path = tmp_path / "deployment.yaml"
    path.write_text("model: {provider: anthropic, config: {model: x}}\nplugins:\n  - {id: a, config: {k: [1]}}\n")
    cached = str(tmp_path / "validated.cache")
    first = ValidatedForms(cached, environment_key(Catalog().fingerprint), RECORDS)
    validated = load_deployment(path, validated=first)
    first.save()
    (form,) = json.loads(Path(cached).read_text())["environments"][0]["deployments"].values()
    assert form["deployment"]["model"] == {"provider": "anthropic", "config": {"model": "x"}}
    again = load_deployment(path, validated=ValidatedForms(cached, environment_key(Catalog().fingerprint), RECORDS))
    assert again == validated and again.model == ModelChoice("anthropic", {"model": "x"})
    assert [type(r) for r in (again.persistence, again.model, *(again.plugins or ()))] == [
        PersistenceChoice,
        ModelChoice,
        PluginEntry,
    ]
