#!/usr/bin/env bash
# --lane: pjrt without a usable plugin fails with one line and a non-zero exit; auto falls back
# to host and says why in one line; a bad lane or precision is refused, the three dot
# precisions are taken.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TLALOC_PJRT_PLUGIN="$tmp/no-such-plugin.so"
steps=(train disc --steps 3 --log-every 3 --points 32 --threads 1)

if "$TLALOC" "${steps[@]}" --lane pjrt >"$tmp/out" 2>"$tmp/err"; then
  echo "FAIL: --lane pjrt succeeded without a plugin"; exit 1
fi
[ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "FAIL: expected one error line:"; cat "$tmp/err"; exit 1; }
grep -q "^tlaloc: error: --lane pjrt: pjrt unavailable: .*no-such-plugin.so" "$tmp/err" ||
  { echo "FAIL: unexpected message:"; cat "$tmp/err"; exit 1; }

"$TLALOC" "${steps[@]}" --lane auto >"$tmp/out"
[ "$(grep -c '^lane: ' "$tmp/out")" -eq 1 ] || { echo "FAIL: no single lane line"; cat "$tmp/out"; exit 1; }
grep -q "^lane: host (pjrt unavailable: .*no-such-plugin.so" "$tmp/out" ||
  { echo "FAIL: auto did not fall back to host with the reason:"; cat "$tmp/out"; exit 1; }
grep -q "training on the host lane" "$tmp/out" || { echo "FAIL: not trained on host"; exit 1; }

TLALOC_LANE=auto "$TLALOC" "${steps[@]}" >"$tmp/out"
grep -q "^lane: host (pjrt unavailable" "$tmp/out" || { echo "FAIL: TLALOC_LANE ignored"; exit 1; }

for bad in "--lane gpu" "--precision tf32" "--matmul-precision tf32" "--cross-check on"; do
  # shellcheck disable=SC2086
  if "$TLALOC" "${steps[@]}" $bad >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: $bad accepted"; exit 1
  fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "FAIL: $bad: expected one line"; cat "$tmp/err"; exit 1; }
done
# train takes export's three dot precisions (they matter only on the pjrt lane).
for p in default high highest; do
  "$TLALOC" "${steps[@]}" --matmul-precision "$p" >"$tmp/out" ||
    { echo "FAIL: --matmul-precision $p refused"; exit 1; }
done
# bench step: lane (a) runs, lanes (b) and (c) say why they were skipped.
"$TLALOC" bench step --steps 5 --warmup 10 --threads 1 >"$tmp/out"
grep -q "^(a) host lane.* [0-9.]* " "$tmp/out" || { echo "FAIL: no lane (a) row"; cat "$tmp/out"; exit 1; }
[ "$(grep -c "skipped: pjrt unavailable: .*no-such-plugin.so" "$tmp/out")" -eq 2 ] ||
  { echo "FAIL: lanes (b)/(c) not skipped with the reason"; cat "$tmp/out"; exit 1; }
grep -q "^RESULT tlaloc lane_a_median_ms=" "$tmp/out" || { echo "FAIL: no RESULT line"; exit 1; }
echo "lanes: ok"
