# Set-up output a newcomer can read, sourced by the scripts in scripts/: one line per step
# on the terminal, every command's own output (pip's, apt's) in a log file under .logs/, and
# on failure the end of that log and a last line naming it.
#
#   source scripts/steps.sh; steps_log NAME      # details go to .logs/NAME.log (new each run)
#   step "installing torch" pip install ...      # "installing torch ... ok" (or the failure)
#   note "torch: already installed"              # a line for a step that had nothing to do

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
  echo "error: '$what' failed (exit $rc); the whole output is in $STEPS_LOG" >&2
  exit "$rc"
}
