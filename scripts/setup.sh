#!/usr/bin/env bash
# Set up this host for the harness, idempotently: Python dependencies, a running Docker engine
# (Debian's docker.io when none is reachable), debootstrap, and the local base image.
# Needs root for the system parts; never touches an engine that already answers.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
# The host engine and the workload tests run in this environment: keep a torch that is already there
# (a GPU host's own stack), else take the CPU build of torch 2.13.0.
python3 -c 'import torch' 2>/dev/null || python3 -m pip install --quiet torch==2.13.0
python3 -c 'import accelerate' 2>/dev/null || python3 -m pip install --quiet accelerate==1.15.0

if ! docker info >/dev/null 2>&1; then
  if ! command -v dockerd >/dev/null 2>&1; then
    log "no Docker engine: installing Debian's docker.io"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null
  fi
  if ! docker info >/dev/null 2>&1; then
    log "starting dockerd (log: /var/log/harness-dockerd.log)"
    setsid nohup dockerd >/var/log/harness-dockerd.log 2>&1 < /dev/null &
    for _ in $(seq 1 60); do
      docker info >/dev/null 2>&1 && break
      sleep 1
    done
  fi
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/harness-dockerd.log"; exit 4; }
fi
log "Docker engine: $(docker version --format '{{.Server.Version}}')"

if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap (to make base images without a registry)"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
fi

python3 -m harness base-image
