"""The model-facing description: what it teaches and what it must never say."""

from __future__ import annotations

from dsh.tool_pwsh import PWSH_DESCRIPTION


def test_description_uses_env_drive_wording() -> None:
    assert "$env:DSH_*" in PWSH_DESCRIPTION
    assert "JSONL" not in PWSH_DESCRIPTION and "SESSION_ID" not in PWSH_DESCRIPTION
