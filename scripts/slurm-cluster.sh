#!/usr/bin/env bash
# A real two-node Slurm cluster on one machine, for the slurm engine's multi-node tests and for trying
# `--engine slurm --nodes 2` without a cluster:
#
#   scripts/slurm-cluster.sh up NAME SHARED_DIR [NODES [BARE]]  # prints SLURM_CONF=<file>; submit with it set
#   scripts/slurm-cluster.sh down NAME            # removes the containers, the network and the config folder
#
# `up` makes containers on a Docker network of their own (NAME-net): NAME-ctl (munged, slurmctld) and the
# nodes NAME-n1 ... NAME-nNODES (NODES: 2 unless given, at most 8; munged, slurmd), each with its own
# hostname and network namespace. BARE names one node (e.g. n4) started without this host's Python tree, as
# a node whose software mount is missing: the fleet's tests use it as a node broken for real. They
# run on the image nccl-harness-slurmnode:<hash>, built offline from the local base image
# harness-base:bookworm and Debian's slurmd/slurmctld/slurm-client/munge packages taken from this host's
# apt (the same versions as the host's slurm-wlm 22.05: from /var/cache/apt/archives, else `apt-get
# download`), no registry. The image stays as a cache (`docker rmi` it by hand). Every node sees, at the
# same paths as this host: SHARED_DIR (read-write: the results folder), this host's Python tree
# (/root/.pyenv, read-only) and this checkout (read-only), so ranks run on the nodes' "own" Python stack
# as the host engine's do; the munge key is this host's (/etc/munge/munge.key), so that this host's
# sbatch/squeue/scancel, with SLURM_CONF set to the printed file, talk to NAME-ctl. This host's own Slurm
# (scripts/slurm-local.sh, /etc/slurm/slurm.conf) is not touched.
# Needs root and a Docker engine. Exit 4 (with the daemons' logs) when the nodes do not come up idle.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
TAG=slurm-cluster
LOG="$REPO/.cache/slurm-cluster.log"
mkdir -p "$(dirname "$LOG")"
. scripts/lib/step.sh
. scripts/lib/slurm-conf.sh

LABEL=io.nccl-harness.slurm-cluster
PACKAGES="slurmd slurmctld slurm-client munge"
BASE=harness-base:bookworm
PYTREE=/root/.pyenv
PYCACHE="${XDG_CACHE_HOME:-$HOME/.cache}/nccl-harness/pycache"  # harness/engines/host.py's bytecode cache

usage() { say "usage: $0 up NAME SHARED_DIR [NODES [BARE]] | down NAME"; exit 2; }
node_names() { seq -f 'n%g' 1 "$NODES"; }
conf_dir() { echo "/tmp/nccl-harness-cluster-$1"; }
# munge's socket, the same path on this host (a munged of the cluster's own, beside any other) and in
# every container (slurm.conf's AuthInfo)
socket_dir() { echo "/run/nccl-harness-munge-$1"; }

# The packages the nodes need beyond the base image: the dependency closure of $PACKAGES as this host
# resolved it (only packages installed here, so alternatives are the host's choices), less the base's.
missing_packages() {
  local closure base
  closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances $PACKAGES | grep -v '^[ <]' | sort -u)
  base=$(docker run --rm --network none "$BASE" dpkg-query -W -f '${Package}\n' | sort -u)
  for p in $(comm -23 <(echo "$closure") <(echo "$base")); do
    dpkg-query -W -f '${db:Status-Abbrev}|${Package}=${Version}\n' "$p" 2>/dev/null | awk -F'|' '/^ii/ {print $2}'
  done
}

fetch_debs() {  # $1: build context; the host's cached .deb of each package, else apt-get download
  mkdir -p "$1/debs"
  for pv in $(missing_packages); do
    local p=${pv%%=*} v=${pv#*=} cached
    cached=$(ls /var/cache/apt/archives/"${p}_${v/:/%3a}"_*.deb 2>/dev/null | head -n 1 || true)
    if [ -n "$cached" ]; then cp "$cached" "$1/debs/"; else (cd "$1/debs" && apt-get download "$pv"); fi
  done
  ls "$1/debs"
}

build_image() {  # prints the image tag; builds it when missing
  local ctx; ctx=$(mktemp -d)
  fetch_debs "$ctx" >>"$LOG" 2>&1
  cat >"$ctx/Dockerfile" <<EOF
FROM $BASE
# Debian's Slurm and munge, the host's own .debs (scripts/slurm-cluster.sh); no network in the build
COPY debs/ /tmp/debs/
RUN dpkg -i /tmp/debs/*.deb && rm -rf /tmp/debs && mkdir -p /var/spool/slurmd /var/spool/slurmctld /var/log/slurm
LABEL io.nccl-harness.slurmnode=1
EOF
  local tag="nccl-harness-slurmnode:$( (cd "$ctx" && ls debs; cat Dockerfile) | sha256sum | cut -c1-12)"
  if ! docker image inspect "$tag" >/dev/null 2>&1; then
    docker build --network none -t "$tag" "$ctx" >>"$LOG" 2>&1
  fi
  rm -rf "$ctx"
  echo "$tag"
}

ip_of() {  # $1 container, $2 network
  docker inspect -f "{{(index .NetworkSettings.Networks \"$2\").IPAddress}}" "$1"
}

write_conf() {  # $1 name, $2 controller address, $3 file
  cat >"$3" <<EOF
# written by nccl-harness scripts/slurm-cluster.sh: two nodes in containers (slurm.conf(5), Slurm 22.05)
ClusterName=harness
SlurmctldHost=$1-ctl($2)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$(socket_dir "$1")/munge.socket.2
$(slurm_conf_plugins)
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/var/run/slurmctld.pid
SlurmdPidFile=/var/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
$(slurm_conf_timers)
# NodeAddr: this host resolves no container's name, and its srun ("srun --jobid=J --overlap", the harness's
# forensics on every node) talks to each slurmd directly, as a login node does on a cluster
$(for n in $(seq 1 "$NODES"); do
  echo "NodeName=$1-n$n NodeAddr=$(ip_of "$1-n$n" "$1-net") CPUs=$(nproc) RealMemory=1000 State=UNKNOWN"
done)
PartitionName=nodes Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

start_container() {  # $1 container name, $2 image, $3 network, $4 shared dir, $5 config dir
  local mounts=(-v "$5:$5:ro" -v "$4:$4" -v "$REPO:$REPO:ro")
  if [ "$1" != "$NAME-$BARE" ]; then  # BARE: a node without the Python tree (its mount missing)
    mounts+=(-v "$PYTREE:$PYTREE:ro")
    [ -d "$PYCACHE" ] && mounts+=(-v "$PYCACHE:$PYCACHE:ro")  # torch's bytecode, compiled once on the host
  fi
  docker run -d --name "$1" --hostname "$1" --network "$3" --label "$LABEL=${1%-*}" \
    -e SLURM_CONF="$5/slurm.conf" "${mounts[@]}" \
    --init "$2" sleep infinity >/dev/null
}

# munged with the cluster's key ($conf/munge.key, made by `up`) and socket: $1 a container, or "" for this host
start_munged() {
  local conf sock
  conf=$(conf_dir "$NAME"); sock=$(socket_dir "$NAME")
  local line="mkdir -p $sock /var/lib/munge-$NAME && install -o munge -g munge -m 0400 $conf/munge.key /var/lib/munge-$NAME/key &&
    chown munge:munge $sock /var/lib/munge-$NAME && runuser -u munge -- munged --socket=$sock/munge.socket.2 \
    --key-file=/var/lib/munge-$NAME/key --pid-file=$sock/munged.pid --seed-file=/var/lib/munge-$NAME/seed \
    --log-file=/var/lib/munge-$NAME/munged.log"
  if [ -n "$1" ]; then docker exec "$1" sh -c "$line"; else sh -c "$line"; fi
}

wait_idle() {  # $1 SLURM_CONF
  local state
  for _ in $(seq 1 60); do
    state=$(SLURM_CONF=$1 sinfo -h -o '%T %D' 2>/dev/null || true)
    [ "$state" = "idle $NODES" ] && return 0
    sleep 1
  done
  echo "the nodes are '${state:-not listed}' after 60 s"
  return 4
}

up() {
  local name=$1 shared=$2 conf image ctl_ip
  conf=$(conf_dir "$name")
  docker image inspect "$BASE" >/dev/null 2>&1 || { say "no $BASE image. Fix: invoke base-image (or scripts/setup.sh)"; exit 4; }
  command -v munged >/dev/null && command -v sbatch >/dev/null ||
    { say "no munged or sbatch on this host. Fix: apt-get install munge slurm-client (or run scripts/slurm-local.sh once)"; exit 4; }
  mkdir -p "$conf" "$shared"
  mungekey --create --force --keyfile="$conf/munge.key" && chmod 0400 "$conf/munge.key"
  image=$(build_image)
  say "node image $image"
  trap 'down "$name"' EXIT  # a failure on the way up leaves nothing behind
  docker network create --label "$LABEL=$name" "$name-net" >/dev/null
  for c in ctl $(node_names); do start_container "$name-$c" "$image" "$name-net" "$shared" "$conf"; done
  ctl_ip=$(ip_of "$name-ctl" "$name-net")
  write_conf "$name" "$ctl_ip" "$conf/slurm.conf"
  for c in "" ctl $(node_names); do start_munged "${c:+$name-$c}"; done
  docker exec "$name-ctl" slurmctld
  for c in $(node_names); do docker exec "$name-$c" slurmd -N "$name-$c"; done
  if ! out=$(wait_idle "$conf/slurm.conf"); then
    say "$out; the daemons' logs:"
    for c in ctl $(node_names); do docker exec "$name-$c" sh -c 'tail -n 15 /var/log/slurm/*.log' 2>&1 | sed "s/^/[$TAG]   | $c: /" >&2; done
    exit 4
  fi
  trap - EXIT
  echo "SLURM_CONF=$conf/slurm.conf"
}

down() {
  local name=$1 ids
  ids=$(docker ps -aq --filter "label=$LABEL=$name")
  [ -z "$ids" ] || docker rm -f $ids >/dev/null
  docker network rm "$name-net" >/dev/null 2>&1 || true
  local pidfile; pidfile="$(socket_dir "$name")/munged.pid"
  [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true  # this cluster's munged on the host, by its pid
  rm -rf "$(conf_dir "$name")" "$(socket_dir "$name")" "/var/lib/munge-$name"
}

[ "$(id -u)" = 0 ] || { say "needs root (Docker, the munge key)"; exit 4; }
case "${1:-}" in
  up) NAME=${2:-}; NODES=${4:-2}; BARE=${5:-}; [ $# -ge 3 ] && [ $# -le 5 ] || usage
      [[ $2 =~ ^[a-z0-9][a-z0-9-]{0,30}$ ]] && [[ $NODES =~ ^[2-8]$ ]] && [[ -z $BARE || $BARE =~ ^n[1-8]$ ]] || usage
      : >"$LOG"; up "$2" "$3" ;;
  down) [ $# = 2 ] || usage; down "$2" ;;
  *) usage ;;
esac
