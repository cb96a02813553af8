#!/usr/bin/env bash
# Packs what bench/gpu/run.sh needs on a GPU machine that has no Node.js and reaches no
# registry, into .gpu/ (kept out of git through .git/info/exclude): this node binary, the
# compiled build (dist/), models/raw_v1, the packages the inference engine loads (all three
# backends: onnxruntime-node's Linux x64 binary, onnxruntime-web's WASM and WebGPU builds,
# Dawn), and Debian's Vulkan loader and GL vendor-neutral libraries as .debs
# (docs/gpu.md: without them Dawn finds no adapter). Run from the project root after
# `npm ci`. Everything carried must stay under the device tool's 64 MiB.
set -eu
[ -f package.json ] && [ -d dist/src ] || { echo "run from the project root after npm ci (dist/ is built by it)"; exit 1; }
mkdir -p .git/info; grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
p=$stage/proj nm=node_modules
mkdir -p "$p/models" "$p/$nm/onnxruntime-web/dist" "$p/$nm/webgpu/dist" "$p/$nm/onnxruntime-node"
cp -r dist "$p/"; cp -r models/raw_v1 "$p/models/"
echo '{"name":"gpu-probe","type":"module","private":true}' > "$p/package.json"
# What dist/src/inference and its pool bundle import at run time (scripts/bundle.mjs leaves
# native and thread-starting packages external).
for pkg in @sinclair/typebox piscina prom-client tdigest bintrees @opentelemetry/api onnxruntime-common; do
  [ -d "$nm/$pkg" ] && { mkdir -p "$p/$nm/$(dirname "$pkg")"; cp -r "$nm/$pkg" "$p/$nm/$pkg"; }
done
cp $nm/onnxruntime-web/package.json "$p/$nm/onnxruntime-web/"
cp $nm/onnxruntime-web/dist/{ort.node.min.mjs,ort.webgpu.bundle.min.mjs,ort-wasm-simd-threaded.mjs,ort-wasm-simd-threaded.wasm,ort-wasm-simd-threaded.asyncify.mjs,ort-wasm-simd-threaded.asyncify.wasm} "$p/$nm/onnxruntime-web/dist/"
cp $nm/webgpu/package.json $nm/webgpu/index.js "$p/$nm/webgpu/"; cp -r $nm/webgpu/dist/linux-x64 "$p/$nm/webgpu/dist/"
(cd $nm/onnxruntime-node && cp -r --parents package.json dist bin/napi-v*/linux/x64 "$p/$nm/onnxruntime-node/")
cp "$(readlink -f "$(command -v node)")" "$stage/node"
rm -rf .gpu; mkdir -p .gpu/gl
tar -cJf .gpu/bundle.tar.xz -C "$stage" .
(cd .gpu/gl && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1) \
  || { echo "apt-get download failed: run 'apt-get update' once"; exit 1; }
du -sh .gpu; echo "on the GPU machine, from the project root, with .gpu carried: bash bench/gpu/run.sh .gpu"
