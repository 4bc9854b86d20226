#!/bin/bash
# Counts the sessions started, in the plugin's own persistent data folder.
cat >/dev/null
count_file="${CLAUDE_PLUGIN_DATA:?CLAUDE_PLUGIN_DATA is not set}/sessions"
count=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
echo "$count" > "$count_file"
