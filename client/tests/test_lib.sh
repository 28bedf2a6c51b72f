# Helpers shared by the CLI test scripts (sourced).
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
pass() { printf 'ok   %s\n' "$*"; }

# expect_exit CODE DESCRIPTION -- COMMAND...: runs COMMAND, captures stdout in
# $out and stderr in $err, and fails unless it exits with CODE.
expect_exit() {
  local want=$1 what=$2
  shift 3
  local rc=0
  out=$("$@" 2>"$tmp/stderr") || rc=$?
  err=$(cat "$tmp/stderr")
  [[ $rc -eq $want ]] || fail "$what: exit $rc, want $want; stdout: $out; stderr: $err"
}

# expect_contains HAYSTACK NEEDLE DESCRIPTION
expect_contains() {
  [[ $1 == *"$2"* ]] || fail "$3: '$2' not in: $1"
}
