# Set-up output a newcomer can read, sourced by the scripts in scripts/: one line per step
# on the terminal, every command's own output (pip's, apt's) in a log file under .logs/, and
# on failure the end of that log and a last line naming it.
#
#   source scripts/steps.sh; steps_log NAME      # details go to .logs/NAME.log (new each run)
#   step "installing torch" pip install ...      # "installing torch ... ok" (or the failure)
#   note "torch: already installed"              # a line for a step that had nothing to do
#   needs_disk 7 "torch and SGLang"              # stop at once if they cannot fit on the disk

steps_log() {
  mkdir -p .logs
  STEPS_LOG=".logs/$1.log"
  : >"$STEPS_LOG"
}

note() {
  echo "  $*"
}

step() {  # step WHAT COMMAND [ARGS...]: run COMMAND, its output into the log
  local what=$1 rc=0
  shift
  printf '  %s ... ' "$what"
  echo "== $what: $*" >>"$STEPS_LOG"
  "$@" >>"$STEPS_LOG" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "ok"
    return 0
  fi
  echo "failed"
  echo "---- the end of $STEPS_LOG ----" >&2
  tail -n 25 "$STEPS_LOG" >&2
  if grep -q "No space left on device" "$STEPS_LOG"; then
    echo "the disk is full: $(free_gb) GB free in $(pwd) (df -h .); free some and re-run" >&2
  fi
  echo "error: '$what' failed (exit $rc); the whole output is in $STEPS_LOG" >&2
  exit "$rc"
}

free_gb() {  # whole GB free on the file system of the current directory
  df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }'
}

needs_disk() {  # needs_disk GB WHAT: an install that cannot fit stops before it starts
  local free
  free=$(free_gb)
  if [ "$free" -lt "$1" ]; then
    echo "error: $2 needs about $1 GB free in $(pwd); $free GB are free (df -h .)" >&2
    exit 1
  fi
}
