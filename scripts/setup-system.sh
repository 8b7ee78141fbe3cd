#!/usr/bin/env bash
# System packages the test suite drives for real: Chromium (web inbox tests), PostgreSQL
# (store tests), node + npm (the reference MCP server, server-everything, fetched by
# tests/integrations/mcp/test_everything.py into .cache/) and tmux (the `signoff watch`
# end-to-end test). Idempotent; installs only what is missing. Needs root and apt
# (Debian), as on CI; elsewhere it says what to install and leaves the decision to you.
set -euo pipefail

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
[ -x /usr/bin/tmux ] || need+=(tmux)  # the signoff watch end-to-end test

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "setup-system: please install: ${need[*]} (needs root + apt)" >&2
  exit 0
fi
echo "setup-system: installing ${need[*]} from Debian packages…" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
