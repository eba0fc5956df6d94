#!/usr/bin/env bash
# Check (and where possible install) the system tools tinyedu needs beyond Python packages:
#   - a C compiler (the C backend compiles kernels with it),
#   - graphviz's `dot` (every stage draws itself with graphviz),
#   - with --browser (the test suite): a Chromium for the browser test of the site, and, on x86-64
#     Linux, the aarch64 cross compiler and qemu-user that run the NEON device's kernels (on arm64
#     NEON is native; elsewhere its tests are skipped, saying why), and on Linux an OpenCL platform
#     for the GPU device (PoCL, which runs OpenCL kernels on the CPU, and the ICD loader; macOS has
#     OpenCL built in), clang and lld for the WASM device, and Mesa's Vulkan drivers (lavapipe) for
#     the WEBGPU device,
#   - with --bench: clang, which tinygrad's CPU backend (compared against in bench/) compiles with.
# On Debian/Ubuntu it installs what is missing with apt-get, on macOS with brew; anywhere else it
# stops and prints exactly what to run.
set -euo pipefail

want_browser=0
want_bench=0
[ "${1:-}" = "--browser" ] && want_browser=1
[ "${1:-}" = "--bench" ] && want_bench=1

missing_apt=()   # Debian package names
missing_brew=()  # Homebrew formula names
have() { command -v "$1" >/dev/null 2>&1; }

python_ok=$(${PYTHON:-python3} -c 'import sys; print(int(sys.version_info >= (3, 10)))' 2>/dev/null || echo 0)
if [ "$python_ok" != 1 ]; then
  echo "tinyedu needs Python >= 3.10 as \`${PYTHON:-python3}\` (set PYTHON=/path/to/python3.x to choose one)." >&2
  exit 1
fi
if ! ${PYTHON:-python3} -c 'import venv, ensurepip' >/dev/null 2>&1; then
  missing_apt+=(python3-venv)
fi

if [ -z "${CC:-}" ] && ! have cc && ! have gcc && ! have clang; then
  missing_apt+=(gcc libc6-dev); missing_brew+=("(run: xcode-select --install)")
fi
if ! have dot; then missing_apt+=(graphviz); missing_brew+=(graphviz); fi

find_chromium() {
  for c in "${CHROMIUM:-}" chromium chromium-browser google-chrome google-chrome-stable \
           "/Applications/Chromium.app/Contents/MacOS/Chromium" \
           "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"; do
    [ -n "$c" ] && { have "$c" || [ -x "$c" ]; } && return 0
  done
  return 1
}
if [ "$want_browser" = 1 ] && ! find_chromium; then
  missing_apt+=(chromium); missing_brew+=("--cask chromium")
fi
if [ "$want_browser" = 1 ] && [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ] && \
   { ! have "${NEON_CC:-aarch64-linux-gnu-gcc}" || ! have "${NEON_QEMU:-qemu-aarch64}" || \
     [ ! -d "${NEON_SYSROOT:-/usr/aarch64-linux-gnu}/lib" ]; }; then
  missing_apt+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
fi
if [ "$want_browser" = 1 ] && [ "$(uname -s)" = Linux ] && \
   { ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || ! ldconfig -p 2>/dev/null | grep -q libOpenCL.so.1; }; then
  missing_apt+=(pocl-opencl-icd ocl-icd-libopencl1)
fi

# The WASM device builds wasm32 modules with clang and wasm-ld (lld); the WEBGPU device runs through
# Vulkan, which Mesa's lavapipe provides on a machine without a GPU (macOS has Metal built in).
if [ "$want_browser" = 1 ] && [ "$(uname -s)" = Linux ] && { ! have clang || ! have wasm-ld; }; then
  missing_apt+=(clang lld)
fi
if [ "$want_browser" = 1 ] && [ "$(uname -s)" = Linux ] && \
   ! ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1 && ! ls /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  missing_apt+=(mesa-vulkan-drivers)
fi

if [ "$want_bench" = 1 ] && ! have clang; then
  missing_apt+=(clang); missing_brew+=("(run: xcode-select --install)")
fi

if [ ${#missing_apt[@]} -eq 0 ]; then
  exit 0
fi

if have apt-get; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && have sudo && sudo="sudo"
  if [ "$(id -u)" -ne 0 ] && [ -z "$sudo" ]; then
    echo "Missing system packages: ${missing_apt[*]}. Run as root: apt-get update && apt-get install -y ${missing_apt[*]}" >&2
    exit 1
  fi
  echo "Installing system packages with apt-get: ${missing_apt[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing_apt[@]}"
elif [ "$(uname)" = Darwin ] && have brew; then
  for f in "${missing_brew[@]}"; do
    case "$f" in
      "(run:"*) echo "A C compiler (clang) is missing. $f" >&2; exit 1 ;;
      *) echo "Installing with brew: $f"; brew install $f ;;
    esac
  done
else
  echo "Missing system tools. Install them with your package manager:" >&2
  echo "  Debian/Ubuntu: apt-get install -y ${missing_apt[*]}" >&2
  echo "  macOS (Homebrew): brew install ${missing_brew[*]}" >&2
  echo "or point CC=/path/to/compiler and CHROMIUM=/path/to/chromium at tools you already have." >&2
  exit 1
fi
