#!/bin/bash
# A PreToolUse guard as the hook guides write one: refuse recursive forced deletes.
command=$(jq -r '.tool_input.command // empty')
if printf '%s' "$command" | grep -Eq 'rm[[:space:]]+-[a-zA-Z]*r[a-zA-Z]*f|rm[[:space:]]+-[a-zA-Z]*f[a-zA-Z]*r'; then
  echo "Blocked by guard.sh: recursive forced deletes are not allowed here" >&2
  exit 2
fi
exit 0
