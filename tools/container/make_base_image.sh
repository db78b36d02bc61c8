#!/usr/bin/env bash
# tools/container/make_base_image.sh [IMAGE]: makes the Debian 12 image that Containerfile
# starts from (--build-arg BASE=IMAGE, default localhost/debian:bookworm) without a container
# registry: mmdebstrap --variant=minbase from a Debian mirror, imported into podman (about 1 min).
# Idempotent: an image of that name already in podman's store is kept (REBUILD=1 makes it anew,
# e.g. for the mirror's security updates).
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), DEBIAN_SECURITY_MIRROR
# (default http://deb.debian.org/debian-security), PODMAN (default podman).
set -euo pipefail
image=${1:-localhost/debian:bookworm}
podman=${PODMAN:-podman}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

if [[ ${REBUILD:-0} != 1 ]] && "$podman" image exists "$image"; then
  echo "make_base_image: $image exists (REBUILD=1 to make it again)"
  exit 0
fi
command -v mmdebstrap > /dev/null || {
  echo "make_base_image: mmdebstrap not found (tools/container/install-podman.sh installs it)" >&2
  exit 1
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trellis-base.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The merged-usr hook lays out /bin -> usr/bin etc. itself; without it mmdebstrap installs the
# usrmerge package, which brings perl into the image (~50 MB).
hooks=()
[[ -d /usr/share/mmdebstrap/hooks/merged-usr ]] && hooks=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
# The three suites a Debian image's sources.list has, so that the image's own `apt-get update`
# in Containerfile also sees point-release and security updates.
mmdebstrap --variant=minbase "${hooks[@]}" --format=tar bookworm "$tmp/rootfs.tar" \
  "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
  "deb $security bookworm-security main"
# podman import keeps no configuration: PATH and CMD as Docker's debian image has them.
"$podman" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' \
  --message "mmdebstrap --variant=minbase bookworm $mirror" \
  "$tmp/rootfs.tar" "$image"
echo "make_base_image: $image made from $mirror"
