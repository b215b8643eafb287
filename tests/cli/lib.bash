# Shared by the tests/cli scripts that source it (not a test itself: ctest runs cli/*.sh): strict
# bash, a scratch folder $tmp removed at exit (permissions a test took away are given back
# first), no PJRT plugin, and helpers to check refusals.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
tmp=$(mktemp -d)
cleanup() {
  chmod -R u+rwx "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
export TLALOC_PJRT_PLUGIN="$tmp/no-such-plugin.so"
# tests/cli/st.py (safetensors read / write for the scripts' Python checks) importable.
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
run_as=() # a command prefix for tlaloc (e.g. setpriv ...), see as_nobody
rc=0      # the exit status of the last refused command

die() {
  echo "FAIL: $*"
  exit 1
}

# refused "message" args...: `tlaloc args` fails with "tlaloc: error: message" on its first
# error line and no other line but CLI11's "Run with --help ..." after a usage error; its output
# is in $tmp/out and $tmp/err, its status in $rc. refused also wants nothing printed before
# the error (the problem is found before any work); refused_later allows it.
refused_later() {
  local want=$1
  shift
  rc=0
  "${run_as[@]}" "$TLALOC" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -ne 0 ] || die "accepted: $*"
  head -1 "$tmp/err" | grep -qF -- "tlaloc: error: $want" || die "$*: got $(cat "$tmp/err")"
  [ "$(grep -vc "^Run with --help" "$tmp/err")" -eq 1 ] || die "$*: not one line: $(cat "$tmp/err")"
}
refused() {
  refused_later "$@"
  [ ! -s "$tmp/out" ] || die "$*: work before the error: $(head -3 "$tmp/out")"
}

# as_nobody: sets run_as so that tlaloc runs as a user that file permissions stop: this user
# when not root, else nobody through setpriv (and makes $tmp searchable for it). Returns 1,
# saying what is skipped, when root has no setpriv.
as_nobody() {
  run_as=()
  [ "$(id -u)" -eq 0 ] || return 0
  if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    chmod 755 "$tmp"
    return 0
  fi
  echo "skipped: $* (root without setpriv)"
  return 1
}

# wait_for_line PATTERN FILE PID: until FILE has a line matching PATTERN or process PID ends.
wait_for_line() {
  for _ in $(seq 600); do
    grep -q -- "$1" "$2" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 0
    sleep 0.1
  done
}

# word_corpus: corpus.txt, 300 lines from a fixed word list (no trailing newline: the last line
# counts too), the small text the Llama tests train on.
word_corpus() {
  python3 - <<'PY'
words = "the cat dog sat on a mat log and ran to see big small red sun".split()
lines, x = [], 7
for i in range(300):
    line = []
    for _ in range(3 + i % 7):
        x = (x * 1103515245 + 12345) % 2**31
        line.append(words[x % len(words)])
    lines.append(" ".join(line) + ("." if i % 3 else ""))
open("corpus.txt", "w").write("\n".join(lines))
PY
}
