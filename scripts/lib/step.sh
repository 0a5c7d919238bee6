# say and step, shared by scripts/setup.sh and scripts/slurm-local.sh (sourced; set TAG and LOG first).
# step TITLE COMMAND...: run COMMAND with its output in $LOG; one line saying how it went and how long it
# took. A failing step calls on_step_failure MESSAGE CODE: by default the tail of $LOG and exit CODE; a
# script may define its own after sourcing this.

say() { printf '[%s] %s\n' "$TAG" "$*" >&2; }

on_step_failure() {
  say "$1; the end of $LOG:"
  tail -n 25 "$LOG" | sed "s/^/[$TAG]   | /" >&2
  exit "$2"
}

step() {
  local title=$1 t0=$SECONDS
  shift
  printf '\n== %s: %s\n' "$title" "$*" >>"$LOG"
  if "$@" >>"$LOG" 2>&1; then
    say "$title: ok ($((SECONDS - t0))s)"
  else
    local rc=$?
    on_step_failure "$title: FAILED with exit code $rc after $((SECONDS - t0))s" "$rc"
  fi
}
