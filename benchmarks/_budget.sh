# Sourced by gpu_cells.sh and gpu_check.sh: read_budget VALUE sets BUDGET to VALUE as a
# whole number of seconds, or ends the script with exit 2 and one line naming the value.
read_budget() {
  local ok
  case "$1" in   # digits, read in base 10 below (bash would read 0550 as octal 360)
    ''|*[!0-9]*) ok=0 ;;
    *) ok=$(( ${#1} <= 9 && 10#$1 > 0 )) ;;
  esac
  if [ "$ok" = 0 ]; then
    echo "Error: --budget must be a whole number of seconds > 0 (at most 9 digits), got '$1'" >&2
    exit 2
  fi
  BUDGET=$(( 10#$1 ))
}
