"""LocalExecutorConfig refuses output limits that mean nothing, naming the field."""

from __future__ import annotations

import pytest

from dsh.bash import LocalExecutor, LocalExecutorConfig, check_output_limits
from dsh.core import FieldError


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"max_output": 0}, "max_output", "must be at least 1"),
        ({"max_output": -1}, "max_output", "must be at least 1"),
        ({"max_spill": -1}, "max_spill", "must be 0 or more (or null for the default)"),
        ({"spill_budget": -1}, "spill_budget", "must be 0 or more (or null for the default)"),
    ],
)
def test_a_nonsense_limit_is_refused_naming_its_field(fields: dict[str, int], field: str, reason: str) -> None:
    with pytest.raises(FieldError) as err:
        LocalExecutorConfig(**fields)  # type: ignore[arg-type]
    assert (err.value.field, err.value.reason) == (field, reason)


def test_a_python_caller_of_the_executor_gets_the_same_checks() -> None:
    with pytest.raises(FieldError, match=r"^field 'max_output' must be at least 1$"):
        LocalExecutor(max_output=-1)


def test_the_edges_are_kept() -> None:
    config = LocalExecutorConfig(max_output=1, max_spill=0, spill_budget=0)
    assert (config.max_output, config.max_spill, config.spill_budget) == (1, 0, 0)
    assert LocalExecutorConfig() == LocalExecutorConfig(*LocalExecutorConfig._field_defaults.values())
    check_output_limits(1, None, None)
