#!/usr/bin/env bash
# tools/container/build_image.sh [TAG [PODMAN-BUILD-OPTIONS...]]: builds the image of
# Containerfile (default tag localhost/trellis:latest) with podman, from a Debian 12 base made
# by make_base_image.sh, so no registry is needed. Options go to `podman build` as they are,
# e.g. `--target build` or `--build-arg TRELLIS_CMAKE_ARGS=...`.
# The image a rebuild replaces, and the layers of earlier builds that no image names, are removed
# (labelled by Containerfile: nothing else is touched).
# Environment: TRELLIS_BASE_IMAGE (default localhost/debian:bookworm), PODMAN (default podman).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
tag=${1:-localhost/trellis:latest}
shift || true
base=${TRELLIS_BASE_IMAGE:-localhost/debian:bookworm}
podman=${PODMAN:-podman}

source "$here/podman_host.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trellis-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
podman_host_conf "$tmp"
PODMAN=$podman "$here/make_base_image.sh" "$base"

old=$("$podman" image inspect --format '{{.Id}}' "$tag" 2> /dev/null || true)
start=$SECONDS
"$podman" build --build-arg BASE="$base" -f "$src/Containerfile" -t "$tag" "$@" "$src"
new=$("$podman" image inspect --format '{{.Id}}' "$tag")
if [[ -n $old && $old != "$new" ]]; then
  "$podman" rmi "$old" > /dev/null 2>&1 || true  # still in use by a container: kept
fi
# Layers of earlier builds that no image names any more (the cache of a rebuilt stage); those of
# the images just built stay, for the next build's cache.
for title in trellis trellis-build; do
  "$podman" image prune -f --filter "label=org.opencontainers.image.title=$title" > /dev/null || true
done
echo "build_image: $tag built in $((SECONDS - start)) s ($(("$("$podman" image inspect --format '{{.Size}}' "$tag")" / 1000000)) MB)"
