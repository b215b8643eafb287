#!/usr/bin/env bash
# train fmnist's options: the default warm-up is one epoch's steps, then cosine (the lr of
# every step in the metrics against the formula, computed here); sizes are decimal digits only,
# stored canonically; the other model's size flag, a --limit past the data and images that
# are not 28 x 28 are refused in one line before any work.
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"
data=/usr/share/datasets/fashion-mnist
cd "$tmp"

# 1000 rows in batches of 250: 4 steps an epoch, 12 in all; warm-up over steps 1-4.
"$TLALOC" train fmnist --limit 1000 --batch 250 --epochs 3 --log-every 1 --threads 1 \
  --metrics w.csv --save w.st >/dev/null
python3 - <<'PY' || die "warm-up and cosine: $(cat w.csv)"
import csv, math
rows = [r for r in csv.DictReader(open("w.csv")) if r["kind"] == "step"]
assert [int(r["step"]) for r in rows] == list(range(1, 13)), [r["step"] for r in rows]
for r in rows:
    s = int(r["step"]) - 1  # the 0-based step the lr was used for
    want = 0.003 * (s + 1) / 4 if s < 4 else 0.003 * (1 + math.cos(math.pi * (s - 4) / 8)) / 2
    assert abs(float(r["lr"]) - want) <= 1e-12, (s, r["lr"], want)
PY

common=(train fmnist --epochs 1 --threads 1 --save x.st)
refused "--hidden ' 256': expected sizes in [1, 2^30] separated by commas" "${common[@]}" --hidden " 256"
refused "--hidden '+256': expected sizes" "${common[@]}" --hidden +256
refused "--hidden '99999999999999999999': expected sizes" "${common[@]}" --hidden 99999999999999999999
refused "train fmnist: --hidden is for --model mlp; this run is --model cnn" \
  "${common[@]}" --model cnn --hidden 5
refused "train fmnist: --channels is for --model cnn; this run is --model mlp" "${common[@]}" --channels 5,5
refused "train fmnist: --limit 60001 is more than the 60000 training images of $data" \
  "${common[@]}" --limit 60001
# Sizes are stored canonically: 0256 resumes as 256.
"$TLALOC" train fmnist --hidden 0256 --limit 500 --epochs 1 --threads 1 --save h.st >/dev/null
"$TLALOC" train fmnist --hidden 256 --limit 500 --epochs 2 --threads 1 --resume h.st --save h.st >h.out
grep -q "^resumed from h.st" h.out || die "--hidden 0256 did not resume as 256"

# Images of another size: refused by file, in train and in eval (a CNN read past its buffer).
mkdir small
cp "$data"/*.gz small/
python3 -c "
import gzip, struct
b = gzip.open('$data/t10k-images-idx3-ubyte.gz').read()
gzip.open('small/t10k-images-idx3-ubyte.gz', 'wb').write(struct.pack('>IIII', 0x803, 10000, 10, 10) + b[16:16 + 10**6])"
"$TLALOC" train fmnist --model cnn --channels 4 --limit 256 --epochs 1 --threads 1 --save cnn.st >/dev/null
refused "small/t10k-images-idx3-ubyte.gz: its images are 10 x 10; Fashion-MNIST's are 28 x 28" \
  eval cnn.st --data small
refused "small/t10k-images-idx3-ubyte.gz: its images are 10 x 10; Fashion-MNIST's are 28 x 28" \
  train fmnist --data small --limit 256 --epochs 1 --save y.st
echo "fmnist_options: ok"
