#!/bin/bash
# Stop hook: the agent may stop only once its last message says the completion marker.
# Reads the session transcript (Claude Code's .jsonl) for the last assistant message.
set -euo pipefail

input=$(cat)
transcript_path=$(jq -r '.transcript_path // empty' <<<"$input")
marker="${LOOP_DONE_MARKER:-<done/>}"

if [[ -z "$transcript_path" || ! -f "$transcript_path" ]]; then
  echo "stop-until-done: transcript not found at '$transcript_path'; letting the agent stop" >&2
  exit 0
fi

last_line=$(grep '"role":"assistant"' "$transcript_path" | tail -n 1 || true)
if [[ -z "$last_line" ]]; then
  echo "stop-until-done: no assistant message in the transcript; letting the agent stop" >&2
  exit 0
fi

last_text=$(jq -r '.message.content | map(select(.type == "text")) | map(.text) | join("\n")' <<<"$last_line")

if [[ "$last_text" == *"$marker"* ]]; then
  exit 0
fi

jq -n --arg reason "Not finished: keep going, and end your last message with $marker when the task is done." \
  '{decision: "block", reason: $reason}'
