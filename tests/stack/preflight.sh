#!/usr/bin/env bash
# What `make test-stack` needs from the system: podman with runc, netavark, iptables and aardvark-dns (container
# networks with names), catatonit (compose's `init: true`), podman-compose, mmdebstrap (the stand-in
# images' Debian roots) and patchelf (the packed CPython), and root. On Debian it installs what is missing
# with apt-get; otherwise, or without root, it says what to do in one line and exits 2. It never waits for input.
set -uo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "make test-stack needs root (mmdebstrap, podman's networks and published ports): sudo make test-stack" >&2
  exit 2
fi
need=()
for pkg in podman runc netavark aardvark-dns iptables catatonit podman-compose mmdebstrap patchelf; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
((${#need[@]})) || exit 0

if command -v apt-get >/dev/null 2>&1; then
  echo "make test-stack: installing the system packages it needs: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
    && exit 0
  echo "make test-stack: the install failed; run it yourself: apt-get install -y ${need[*]}" >&2
  exit 2
fi
echo "make test-stack needs ${need[*]} (Debian packages; podman 4.3 and podman-compose 1.0.3 are what it is" \
     "measured with): install them with your system's package manager, then run make test-stack again" >&2
exit 2
