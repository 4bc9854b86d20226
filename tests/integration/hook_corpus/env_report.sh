#!/bin/bash
# Writes the environment facts a hook gets to the file named by $1 (payload on stdin is kept beside it).
payload=$(cat)
jq -n --arg payload "$payload" \
  --arg project "${CLAUDE_PROJECT_DIR-}" --arg session "${CLAUDE_CODE_SESSION_ID-}" \
  --arg thread "${CODEX_THREAD_ID-}" --arg root "${CLAUDE_PLUGIN_ROOT-}" --arg data "${CLAUDE_PLUGIN_DATA-}" \
  '{payload: ($payload | fromjson), CLAUDE_PROJECT_DIR: $project, CLAUDE_CODE_SESSION_ID: $session,
    CODEX_THREAD_ID: $thread, CLAUDE_PLUGIN_ROOT: $root, CLAUDE_PLUGIN_DATA: $data}' > "$1"
