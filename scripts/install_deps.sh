#!/usr/bin/env bash
# Installs the Debian 12 packages fgm builds, tests and benchmarks with.
# Only packages that are missing are installed, so a second run is a no-op.
set -euo pipefail
packages=(
  build-essential cmake pkg-config
  libboost-iostreams-dev zlib1g-dev libbz2-dev liblzma-dev
  libtbb-dev libflatbuffers-dev flatbuffers-compiler
  catch2 libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev libeigen3-dev
  liblinear-tools liblinear-dev libsvm-dev xz-utils bzip2 gzip python3 python3-matplotlib
  python3-liblinear python3-numpy python3-scipy python3-pil
  python3-dev python3-pybind11 pybind11-dev python3-sklearn python3-xgboost python3-pandas python3-pytest
  python3-venv python3-setuptools python3-wheel
  time valgrind
  chromium
  clang libclang-rt-14-dev
  libopenmpi-dev openmpi-bin
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}" >&2
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
