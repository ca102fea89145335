#!/usr/bin/env bash
# Installs, from Debian's packages, whatever TokenScope needs and this
# machine lacks. Safe to run again: it installs nothing when all is present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ccache
  libgtest-dev nlohmann-json3-dev libexpat1-dev
  libimgui-dev libglfw3-dev libstb-dev libgl1-mesa-dri xvfb xauth fonts-dejavu-core
  npm
  clang libclang-rt-14-dev
)
if [ "${TS_WITH_TORCH:-0}" = 1 ]; then
  packages+=(python3-torch libopenblas0-pthread python3-regex python3-numpy python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm may come from elsewhere (e.g. nodesource); do not fight it.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm/}")
fi
todo=()
for p in "${missing[@]}"; do [ -n "$p" ] && todo+=("$p"); done

if [ ${#todo[@]} -eq 0 ]; then
  echo "install-deps: everything present"
  exit 0
fi
echo "install-deps: installing ${todo[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${todo[@]}"
