#!/usr/bin/env bash
# Set up this host for the harness, idempotently: Python dependencies, a running Docker engine
# (Debian's docker.io when none is reachable), debootstrap, iptables, and the local base image.
# Needs root for the system parts; never touches an engine that already answers.
# Prints one line per step with its duration; everything the steps print (pip, apt, debootstrap: about
# 400 lines) goes to .cache/setup.log. A failing step shows the tail of that log and its path, and the
# script exits with the step's code (4 when dockerd does not come up; base-image's own codes).
set -euo pipefail
cd "$(dirname "$0")/.."

LOG="$PWD/.cache/setup.log"
mkdir -p "$(dirname "$LOG")"
: >"$LOG"
started=$SECONDS

TAG=setup
. scripts/lib/step.sh

has_module() { python3 -c "import $1" >/dev/null 2>&1; }

apt_install() {
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

start_dockerd() {
  setsid nohup dockerd >/var/log/harness-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "dockerd did not come up; see /var/log/harness-dockerd.log"
  tail -n 20 /var/log/harness-dockerd.log
  return 4
}

say "full log: $LOG"
step "pip install -e '.[test]'" python3 -m pip install --disable-pip-version-check -e '.[test]'
# The host engine and the workload tests run in this environment: keep a torch that is already there
# (a GPU host's own stack), else take the CPU build of torch 2.13.0.
if has_module torch; then
  say "torch: already installed ($(python3 -c 'import torch; print(torch.__version__)'))"
else
  step "torch 2.13.0" python3 -m pip install --disable-pip-version-check torch==2.13.0
fi
if has_module accelerate; then
  say "accelerate: already installed ($(python3 -c 'import accelerate; print(accelerate.__version__)'))"
else
  step "accelerate 1.15.0" python3 -m pip install --disable-pip-version-check accelerate==1.15.0
fi

if docker info >/dev/null 2>&1; then
  say "docker engine: already running ($(docker version --format '{{.Server.Version}}'))"
else
  command -v dockerd >/dev/null 2>&1 || step "docker engine: apt-get install docker.io" apt_install docker.io
  step "docker engine: start dockerd (log: /var/log/harness-dockerd.log)" start_dockerd
fi

if command -v debootstrap >/dev/null 2>&1; then
  say "debootstrap: already installed"
else
  step "debootstrap: apt-get install debootstrap" apt_install debootstrap
fi

# eu-stack (elfutils): every thread's native stack of a hung rank on the host engine (NCCL's C++
# threads too, which py-spy never shows); the local base image carries its own
if command -v eu-stack >/dev/null 2>&1; then
  say "eu-stack: already installed"
else
  step "eu-stack: apt-get install elfutils" apt_install elfutils
fi

# tests/test_hang_advice.py cuts the path between a cell's ranks for real: nsenter (util-linux) into the
# container's network namespace, then iptables drops what arrives there
if command -v iptables >/dev/null 2>&1; then
  say "iptables: already installed"
else
  step "iptables: apt-get install iptables" apt_install iptables
fi

step "base image harness-base:bookworm" python3 -m harness base-image
say "done in $((SECONDS - started))s"
