#!/usr/bin/env bash
# Retrains the shipped model (model/qwen3-kerneldoc.tar.xz) from Debian's linux-source-6.1 and
# packs it, with the held-out check file the accuracy tests read. About an hour on one core;
# interrupted runs resume from the checkpoint in the work folder. Needs a build (the project's
# tokenizer makes the ids): ./scripts/build.sh first. Extra arguments go to make_model.py.
#
#   QWEN3_TRAIN_WORK=/var/tmp/qwen3-train   the work folder (corpus, checkpoint, export)
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=${QWEN3_TRAIN_WORK:-/var/tmp/qwen3-train}
cli=${QWEN3_BUILD_DIR:-$root_dir/build}/client/qwen3-bpf
name=qwen3-kerneldoc

need=()
for p in python3-torch python3-numpy libopenblas0-pthread linux-source-6.1 xz-utils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if (( ${#need[@]} )); then
  # Without libopenblas0-pthread torch falls back to the reference BLAS, about 10x slower.
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
[[ -x $cli ]] || { echo "retrain: $cli not found: run ./scripts/build.sh first" >&2; exit 2; }

nice -n 10 /usr/bin/python3 "$root_dir/tools/train/make_model.py" --work "$work" --out "$work/$name" \
  --cli "$cli" --tokenizer "$root_dir/third_party/qwen3-tokenizer" "$@"

# A reproducible archive: fixed order, owner and times; xz -9e is what keeps it under 40 MB.
tar -C "$work" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "$name" |
  xz -9e -T1 >"$root_dir/model/$name.tar.xz.new"
mv "$root_dir/model/$name.tar.xz.new" "$root_dir/model/$name.tar.xz"
cp "$work/heldout_check.json" "$root_dir/tests/engine/trained_heldout.json"
du -h "$root_dir/model/$name.tar.xz"
echo "retrain: wrote model/$name.tar.xz and tests/engine/trained_heldout.json; update model/MODEL_CARD.md from $work/$name/training_report.json"
