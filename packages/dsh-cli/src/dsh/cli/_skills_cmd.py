"""``dsh skills``: the skills a deployment offers the model."""

from __future__ import annotations

import argparse
import sys

from dsh.skills import SKILLS

from ._errors import MissingPluginError
from ._open import open_runtime
from ._output import print_json, say


def skills(args: argparse.Namespace) -> int:
    """List every skill found now, with where it came from; malformed files are warnings on stderr."""
    with open_runtime(args.deployment) as runtime:
        registry = runtime.ctx.get(SKILLS)
        if registry is None:
            raise MissingPluginError(
                f"{runtime.source}: the deployment loads no skills plugin; add {{id: skills, name: skills}}",
                deployment=str(runtime.source),
                plugin="skills",
            )
        found = registry.discover()
        for warning in found.warnings:
            print(f"dsh: warning: {warning}", file=sys.stderr)
        if args.json:
            document = {
                "home": registry.home,
                "skills": [s.as_json() for s in found.skills],
                "warnings": list(found.warnings),
            }
            print_json(document)
        else:
            for skill in found.skills:
                origin = f"{skill.distribution} {skill.version}" if skill.distribution else skill.source
                say(f"{skill.name}\n    {skill.description}\n    {skill.path} ({origin})")
        return 0
