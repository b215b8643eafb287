#!/usr/bin/env bash
# Installs every Debian package that tlaloc's build, tests and main job need (Debian 12).
# Idempotent: packages already present are skipped.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git ccache pkg-config
  libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev libomp-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libsentencepiece-dev sentencepiece
  libcairo2-dev fonts-dejavu-core libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format
  python3 python3-numpy python3-torch
  dataset-fashion-mnist fortunes bible-kjv
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
