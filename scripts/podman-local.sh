#!/usr/bin/env bash
# A podman service answering the Docker API on a socket of its own, for the tests of the docker engine
# through podman (issue 21 item 3): installs Debian's podman when missing (root), writes a containers.conf
# for this host, starts `podman system service` and gives it the local base image. Prints DOCKER_HOST.
#
#   bash scripts/podman-local.sh DIR      # DIR: the socket, the config, the service's pid and log
#
# What this host needs in containers.conf (both seen on the CI machine's kind, podman 4.3.1):
# - runtime runc: crun refuses this host's cgroups ("crun: cgroups in hybrid mode not supported, drop all
#   controllers from cgroupv2": cgroup v1 controllers beside a cgroup2 mount);
# - default ulimits within the service's own hard limits: podman asks for nofile 1048576 and the host's
#   nproc by default, and a service that may not raise its own limits cannot set them ("error setting
#   rlimit type 7"). A host where podman runs as is needs neither line.
set -euo pipefail
dir=${1:?usage: podman-local.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sock="$dir/podman.sock"

if ! command -v podman >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { echo "podman is not installed, and installing it needs root" >&2; exit 4; }
  apt-get update -q >"$dir/apt.log" 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman >>"$dir/apt.log" 2>&1 ||
    { tail -n 20 "$dir/apt.log" >&2; exit 4; }
fi

# podman sets its own limits when it starts (here nproc 32768 where this shell has 96363), so the ulimits
# its containers may have are read off the running service: written, then the service started again.
conf() {
  cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$1:$1", "nproc=$2:$2"]
[engine]
runtime = "runc"
EOF
}
hard() { awk -v what="$2" '$0 ~ what {print $(NF-1)}' "/proc/$1/limits"; }
answers() { DOCKER_HOST="unix://$sock" docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
start() {
  rm -f "$sock"
  CONTAINERS_CONF="$dir/containers.conf" setsid nohup podman system service --time=0 "unix://$sock" \
    >"$dir/service.log" 2>&1 </dev/null &
  echo $! >"$dir/service.pid"
  for _ in $(seq 1 60); do answers && return 0; sleep 0.5; done
  echo "podman system service did not answer on $sock" >&2; tail -n 20 "$dir/service.log" >&2; exit 4
}
if ! answers; then
  conf "$(ulimit -Hn)" "$(ulimit -Hu)"
  start
  pid=$(cat "$dir/service.pid")
  nofile=$(hard "$pid" "Max open files"); nproc=$(hard "$pid" "Max processes")
  if [ "$nofile" != "$(ulimit -Hn)" ] || [ "$nproc" != "$(ulimit -Hu)" ]; then
    kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    conf "$nofile" "$nproc"
    start
  fi
fi

# the local base image (made by scripts/setup.sh with debootstrap; no registry): podman has its own store
base=harness-base:bookworm
if ! podman image exists "$base"; then
  docker save "$base" | podman load >"$dir/load.log" 2>&1 || { tail -n 5 "$dir/load.log" >&2; exit 4; }
fi
echo "unix://$sock"
