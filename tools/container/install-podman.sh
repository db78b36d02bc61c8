#!/usr/bin/env bash
# Installs what `make container` and `make container-test` need on Debian 12: podman and
# buildah (build and run the image), mmdebstrap (the Debian base without a registry: see
# make_base_image.sh), runc (crun cannot run under hybrid cgroups: podman_host.sh), uidmap and
# slirp4netns (rootless podman). Idempotent: apt is not touched when all are installed.
set -euo pipefail
packages=(podman buildah mmdebstrap runc uidmap slirp4netns)

command -v dpkg-query > /dev/null 2>&1 || {
  echo "install-podman: not a Debian-based system; install ${packages[*]} with its package manager" >&2
  exit 1
}
missing=()
for pkg in "${packages[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$pkg" 2> /dev/null || true) == "install ok installed" ]] ||
    missing+=("$pkg")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-podman: ${packages[*]} present"
  exit 0
fi
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo > /dev/null || {
    echo "install-podman: need root to install ${missing[*]}" >&2
    exit 1
  }
  as_root=(sudo)
fi
echo "install-podman: installing ${missing[*]}"
"${as_root[@]}" apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
