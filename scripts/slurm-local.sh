#!/usr/bin/env bash
# A real one-node Slurm on this machine, for the slurm engine's tests and for trying `--engine slurm`
# without a cluster, idempotently: Debian's slurm-wlm and munge (installed when missing), a munge key,
# a minimal slurm.conf for this host, munged, slurmctld and slurmd started in the background; done when
# `sinfo` shows the node idle. Nothing listens beyond this host: the controller and the node are this
# host's own name (loopback), and no accounting database is configured.
# Needs root. One line per step; everything the steps print goes to .cache/slurm-local.log, the daemons'
# own logs to /var/log/slurm-harness/. Exit 4 (with the log tails) when the node does not come up.
# A slurm.conf that this script did not write is never replaced: then it only checks that Slurm answers.
set -euo pipefail
cd "$(dirname "$0")/.."

LOG="$PWD/.cache/slurm-local.log"
CONF=/etc/slurm/slurm.conf
STATE=/var/spool/slurm-harness
DAEMON_LOGS=/var/log/slurm-harness
MARK="# written by nccl-harness scripts/slurm-local.sh"
NODE=$(hostname -s)
mkdir -p "$(dirname "$LOG")"
: >"$LOG"
started=$SECONDS

TAG=slurm-local
. scripts/lib/step.sh
. scripts/lib/slurm-conf.sh

fail_with_logs() {
  say "$1; the end of the daemons' logs ($DAEMON_LOGS) and of $LOG:"
  for f in "$DAEMON_LOGS"/*.log "$LOG"; do
    if [ -s "$f" ]; then echo "== $f"; tail -n 15 "$f"; fi
  done | sed "s/^/[$TAG]   | /" >&2
  exit 4
}
on_step_failure() { fail_with_logs "$1"; }

apt_install() {
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

write_conf() {
  # RealMemory: what the node offers jobs; a margin below `free -m` so that slurmd's own check passes
  local mem=$(( $(free -m | awk '/^Mem:/ {print $2}') * 9 / 10 ))
  mkdir -p "$STATE/ctld" "$STATE/d" "$DAEMON_LOGS" /etc/slurm
  cat >"$CONF.new" <<EOF
$MARK (one node, this host; see slurm.conf(5) of Slurm 22.05)
ClusterName=harness
SlurmctldHost=$NODE
SlurmUser=root
AuthType=auth/munge
$(slurm_conf_plugins)
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$DAEMON_LOGS/slurmctld.log
SlurmdLogFile=$DAEMON_LOGS/slurmd.log
$(slurm_conf_timers)
NodeName=$NODE CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  mv "$CONF.new" "$CONF"
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_munged() {
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create --force && chown munge:munge /etc/munge/munge.key; }
  # the default socket answering, not "a munged running": scripts/slurm-cluster.sh runs a munged of each
  # cluster's own on this host (another socket), and with one up this line once started none (seen in CI)
  munge -n >/dev/null 2>&1 || runuser -u munge -- munged
  munge -n | unmunge >/dev/null
}

start_daemons() {
  running "$STATE/slurmctld.pid" || slurmctld
  for _ in $(seq 1 30); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 1; done
  running "$STATE/slurmd.pid" || slurmd
}

wait_idle() {
  for _ in $(seq 1 60); do
    state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
    case $state in
      idle*|mixed*|allocated*) return 0 ;;
      down*|drain*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 1
  done
  echo "node $NODE is '${state:-not listed}' after 60 s"
  return 4
}

[ "$(id -u)" = 0 ] || { say "needs root (it installs packages and starts daemons)"; exit 4; }
say "full log: $LOG"
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
  say "slurm-wlm and munge: already installed (slurm-wlm $(dpkg-query -W -f "\${Version}" slurm-wlm 2>/dev/null))"
else
  step "apt-get install slurm-wlm munge" apt_install slurm-wlm munge
fi
if [ -f "$CONF" ] && ! head -n 1 "$CONF" | grep -qF "$MARK"; then
  say "$CONF was not written by this script: left as it is"
else
  step "slurm.conf for one node ($NODE, $(nproc) CPUs)" write_conf
fi
step "munged" start_munged
step "slurmctld and slurmd (logs: $DAEMON_LOGS)" start_daemons
t0=$SECONDS
if out=$(wait_idle 2>&1); then
  say "node $NODE idle in partition $(sinfo -h -o %P | head -n 1) ($((SECONDS - t0))s)"
else
  echo "$out" >>"$LOG"
  fail_with_logs "$out"
fi
say "done in $((SECONDS - started))s"
