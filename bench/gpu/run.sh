#!/usr/bin/env bash
# On the GPU machine, from the project root with .gpu/ carried (bench/gpu/make-bundle.sh):
#   bash bench/gpu/run.sh [.gpu]
# Unpacks the Vulkan/GL libraries and the bundle, then runs bench/gpu/probe.mjs per backend,
# in order of what matters most, each under its own time limit, everything to $OUT/log.txt
# as it comes ($OUT: the folder whose files come back from the GPU machine).
# Two variants are patched into the bundle's copy of the compiled engine, off unless their
# variable is set (experiments, not the service's behaviour): LV_MAX_BATCH (frames per
# model run, MAX_BATCH) and LV_TIER_UP (let V8 tier WebGPU's WASM up to TurboFan).
set -u
here=$(cd "$(dirname "$0")" && pwd) gpu=$(cd "${1:-.gpu}" && pwd)
log=$OUT/log.txt
for f in "$gpu"/gl/*.deb; do dpkg -x "$f" /; done; ldconfig
# the probe and what it imports come from this checkout, so editing them needs no new bundle
mkdir -p /tmp/b && tar -xJf "$gpu/bundle.tar.xz" -C /tmp/b && mkdir -p /tmp/b/proj/bench/gpu \
  && cp "$here"/../cli-args.mjs "$here"/../engine-load.mjs /tmp/b/proj/bench/ \
  && cp "$here"/probe.mjs "$here"/compare.mjs /tmp/b/proj/bench/gpu/ && cd /tmp/b || exit 1
export XDG_RUNTIME_DIR=/tmp SCORES_DIR=/tmp/scores; mkdir -p $SCORES_DIR
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
  [ -f "$icd" ] && { export VK_ICD_FILENAMES=$icd VK_DRIVER_FILES=$icd; break; }
done
egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f $egl ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
b=proj/dist/src/inference.bundle.mjs
sed -i 's/MAX_BATCH=4;/MAX_BATCH=Number(process.env.LV_MAX_BATCH||4);/g' $b
sed -i 's/MAX_BATCH = 4;/MAX_BATCH = Number(process.env.LV_MAX_BATCH || 4);/' proj/dist/src/inference/manifest.js
sed -i 's/function keepWasmOnBaselineTier(){/function keepWasmOnBaselineTier(){if(process.env.LV_TIER_UP)return;/' $b
{ echo "icd ${VK_ICD_FILENAMES:-none}"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  ./node --version; nproc; grep -c 'LV_MAX_BATCH' $b proj/dist/src/inference/manifest.js; grep -c LV_TIER_UP $b; } >> $log 2>&1

# probe LABEL LIMIT_S ARGS...: runs to its idle figure, then SIGTERM; prints the exit time.
# PROBES=label,label runs only those (the compare lines need both of their labels).
probe() {
  local label=$1 limit=$2; shift 2
  [ -n "${PROBES:-}" ] && [[ ",$PROBES," != *",$label,"* ]] && return 0
  local f=/tmp/$label.out start=$(date +%s)
  ./node proj/bench/gpu/probe.mjs "$label" "$@" > $f 2>&1 & local pid=$!
  while kill -0 $pid 2>/dev/null && ! grep -q waiting_for $f; do
    [ $(( $(date +%s) - start )) -ge $limit ] && { echo "{\"label\":\"$label\",\"timeout_s\":$limit}" >> $f; break; }
    sleep 0.2
  done
  local t0=$(date +%s%N); kill -TERM $pid 2>/dev/null
  for _ in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && { kill -KILL $pid; echo "{\"label\":\"$label\",\"killed_after_term_s\":30}" >> $f; }
  echo "{\"label\":\"$label\",\"exit_after_sigterm_ms\":$(( ($(date +%s%N) - t0) / 1000000 ))}" >> $f
  cut -c1-1500 $f >> $log
}
probe webgpu 120 webgpu 1 3 4,16
probe wasm2 90 wasm 2 3 4
[ -f $SCORES_DIR/scores-wasm2.json ] && ./node proj/bench/gpu/compare.mjs $SCORES_DIR/scores-webgpu.json $SCORES_DIR/scores-wasm2.json >> $log 2>&1
probe native2 60 native 2 3 4
[ -f $SCORES_DIR/scores-native2.json ] && ./node proj/bench/gpu/compare.mjs $SCORES_DIR/scores-native2.json $SCORES_DIR/scores-wasm2.json >> $log 2>&1
probe native16 60 native 16 3 16
LV_MAX_BATCH=32 LV_WARMUP=40 probe webgpu-batch32 120 webgpu 1 3 16,64 single,batch32
LV_MAX_BATCH=32 LV_WARMUP=40 probe native16-batch32 60 native 16 3 16,64 single,batch32
LV_TIER_UP=1 probe webgpu-tierup 90 webgpu 1 3 4,16 single,batch32,color4
probe auto16 150 auto 16 3 16 single,batch32
probe auto4 150 auto 4 3 4 single,color4
probe wasm16 90 wasm 16 3 16
echo "done in ${SECONDS} s" >> $log
