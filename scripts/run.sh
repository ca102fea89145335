#!/usr/bin/env bash
# The one run command: installs what is missing, builds, and starts TokenScope
# on the bundled model. Arguments go to the program, e.g.
#   scripts/run.sh --prompt "Once upon a time"
# With no display it runs the terminal front end instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x build/tokenscope ]; then
  exec build/tokenscope "$@"
fi
echo "run: no display found; starting the terminal front end (tokenscope-cli)."
exec build/tokenscope-cli "$@"
