"""The model-facing description: what it teaches and what it must never say."""

from __future__ import annotations

from dsh.bash_env import SESSION_JSONL_KEY
from dsh.tool_bash import BASH_DESCRIPTION


def test_description_teaches_the_convention_only() -> None:
    assert "$DSH_*" in BASH_DESCRIPTION
    assert SESSION_JSONL_KEY not in BASH_DESCRIPTION and "JSONL" not in BASH_DESCRIPTION
    assert "SESSION_ID" not in BASH_DESCRIPTION
