# shellcheck shell=bash
# Sourced by the container scripts (tools/container/*.sh, tests/e2e/container/): makes podman
# work on hosts where its defaults cannot start a container.
#
# podman_host_conf DIR: where this host needs it, writes DIR/containers.conf and exports
# CONTAINERS_CONF pointing at it (for every podman and buildah command started after); on a
# host where podman's defaults work, or when CONTAINERS_CONF is already set, does nothing.
# CONTAINERS_CONF replaces the system's containers.conf for those commands (podman 4.3 has no
# CONTAINERS_CONF_OVERRIDE), which is why it is written only where it is needed.
#
# Two quirks, both met on a Firecracker VM with podman 4.3.1:
#  - Hybrid cgroups (v1 controllers with a cgroup2 tree at /sys/fs/cgroup/unified): crun 1.8
#    stops with "cgroups in hybrid mode not supported"; runc runs there.
#  - A root without CAP_SYS_RESOURCE cannot raise its hard limits: podman asks for
#    RLIMIT_NOFILE 1048576 and for RLIMIT_NPROC at its own (raised, then capped at
#    kernel.pid_max), and the runtime's setrlimit fails with "Operation not permitted". The
#    limits this shell already has are always grantable, so they are named instead (nproc no
#    higher than pid_max, as podman would).
podman_host_conf() {
  local dir=$1 runtime="" ulimits=""
  [[ -z ${CONTAINERS_CONF:-} ]] || return 0
  if [[ $(stat -fc %T /sys/fs/cgroup 2> /dev/null) != cgroup2fs &&
        $(stat -fc %T /sys/fs/cgroup/unified 2> /dev/null) == cgroup2fs ]] &&
      command -v runc > /dev/null; then
    runtime=runc
  fi
  if ! (ulimit -Hn 1048576) 2> /dev/null; then
    local nofile nproc pid_max
    nofile=$(ulimit -Hn)
    nproc=$(ulimit -Hu)
    pid_max=$(cat /proc/sys/kernel/pid_max)
    [[ $nproc == unlimited || $nproc -gt $pid_max ]] && nproc=$pid_max
    [[ $nofile == unlimited ]] && nofile=1048576
    ulimits="\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\""
  fi
  [[ -n $runtime || -n $ulimits ]] || return 0
  mkdir -p "$dir"
  {
    echo "# Written by tools/container/podman_host.sh for this host (see the comments there)."
    echo "[containers]"
    [[ -z $ulimits ]] || echo "default_ulimits = [$ulimits]"
    echo "[engine]"
    [[ -z $runtime ]] || echo "runtime = \"$runtime\""
  } > "$dir/containers.conf"
  export CONTAINERS_CONF=$dir/containers.conf
  echo "podman: using $CONTAINERS_CONF (${runtime:+runtime $runtime; }${ulimits:+ulimits $ulimits})" >&2
}
