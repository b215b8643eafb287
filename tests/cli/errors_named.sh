#!/usr/bin/env bash
# Errors name what is wrong (issue 18): an unknown command at any level is named with the known
# ones (exit 2); a missing --resume fails before any work; a data folder that cannot be read is reported as unreadable, not missing; a
# folder where a data file should be, or a file given as the data folder, is one line naming
# the path, not an internal error. The unreadable case needs a user that permissions stop: as
# root it runs as nobody through setpriv (skipped without it).
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
data=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
cleanup() {
  chmod -R u+rwx "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
die() {
  echo "FAIL: $*"
  exit 1
}
refused() { # refused STATUS "message" cmd...: that exit status and one line with the message
  local status=$1 want=$2 rc=0
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -eq "$status" ] || die "$*: exit $rc, not $status: $(cat "$tmp/err")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || die "$*: not one line: $(cat "$tmp/err")"
  grep -qF -- "tlaloc: error: $want" "$tmp/err" || die "$*: got $(cat "$tmp/err")"
}

refused 2 "unknown command 'frobnicate' (known: train, export, eval, sample, inspect, bench)" \
  "$TLALOC" frobnicate
refused 2 "bench: unknown command 'stepz' (known: step)" "$TLALOC" bench stepz
refused 2 "train: unknown recipe 'foo' (known: disc, fmnist, lm)" "$TLALOC" train foo

# A --resume that does not exist fails before any work (it failed after the step compiled).
refused 1 "train fmnist: --resume $tmp/missing.st: No such file or directory" \
  "$TLALOC" train fmnist --resume "$tmp/missing.st" --save "$tmp/f.st"
[ ! -s "$tmp/out" ] || die "--resume missing: work before the error: $(head -2 "$tmp/out")"

# A folder in place of a data file; a file given as the data folder.
mkdir "$tmp/d"
cp "$data"/* "$tmp/d/"
rm "$tmp/d/t10k-labels-idx1-ubyte.gz"
mkdir "$tmp/d/t10k-labels-idx1-ubyte.gz"
refused 1 "$tmp/d/t10k-labels-idx1-ubyte.gz is a folder, not an idx file" \
  "$TLALOC" train fmnist --data "$tmp/d" --limit 64 --save "$tmp/f.st"
"$TLALOC" train fmnist --limit 64 --batch 64 --epochs 1 --threads 1 --save "$tmp/m.st" >/dev/null
refused 1 "$tmp/d/t10k-labels-idx1-ubyte.gz is a folder, not an idx file" \
  "$TLALOC" eval "$tmp/m.st" --data "$tmp/d"
refused 1 "$data/t10k-images-idx3-ubyte.gz is not a folder" \
  "$TLALOC" train fmnist --data "$data/t10k-images-idx3-ubyte.gz" --save "$tmp/f.st"

# A data folder this user may not search: unreadable, with the reason.
mkdir "$tmp/locked" "$tmp/w"
cp "$data"/* "$tmp/locked/"
chmod 700 "$tmp/locked"
chmod 777 "$tmp/w" # where the unprivileged run may save
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    chmod 755 "$tmp"
  else
    as_user=(skip)
    echo "skipped: unreadable data folder (root without setpriv)"
  fi
else
  chmod 000 "$tmp/locked"
fi
if [ "${as_user[0]:-}" != skip ]; then
  refused 1 "$tmp/locked/train-images-idx3-ubyte.gz: cannot read the data folder $tmp/locked: Permission denied" \
    "${as_user[@]}" "$TLALOC" train fmnist --data "$tmp/locked" --save "$tmp/w/f.st"
fi
echo "errors_named: ok"
