// What readiness says when WebGPU was wanted and the engine serves on WASM instead. Dawn
// reaches a GPU on Linux through the Vulkan loader, which with NVIDIA's driver also needs the
// GL vendor-neutral dispatch libraries; a host with the driver but without them shows a GPU
// to nvidia-smi and none to Dawn, and the engine served on WASM with nothing but a log line
// to say so. docs/gpu.md lists what a GPU host needs.
import { existsSync, readdirSync } from 'node:fs';

/** Debian's package names for what Dawn loads beside the GPU driver. */
export const GPU_HOST_PACKAGES = ['libvulkan1', 'libglvnd0', 'libgl1', 'libglx0', 'libegl1', 'libgles2', 'libopengl0'];

/** A GPU driver's device node: NVIDIA's, or a DRM render node (AMD, Intel, NVIDIA's open
 * module). Only a hint that a GPU is there, used to decide whether `auto` mentions it. */
export function gpuDeviceNode(): string | null {
  if (existsSync('/dev/nvidia0')) return '/dev/nvidia0';
  try {
    const render = readdirSync('/dev/dri').find((n) => n.startsWith('renderD'));
    return render ? `/dev/dri/${render}` : null;
  } catch {
    return null;
  }
}

/**
 * The readiness note when Dawn found no adapter, or null when silence is right. An explicit
 * `webgpu` always gets one: the operator asked for a GPU and is not getting it. `auto` gets
 * one only where a GPU device node exists, since a CPU-only host serving on the CPU is
 * expected, not news.
 */
export function noAdapterNote(requested: 'auto' | 'webgpu', deviceNode: string | null = gpuDeviceNode()): string | null {
  if (requested === 'auto' && !deviceNode) return null;
  const seen = deviceNode ? `the host has a GPU (${deviceNode}) but ` : '';
  return `WebGPU unavailable: ${seen}Dawn found no adapter, so the engine serves on ${requested === 'webgpu' ? 'WASM' : 'the CPU'}. Dawn needs the Vulkan loader and the GL vendor-neutral libraries beside the GPU driver (Debian: ${GPU_HOST_PACKAGES.join(', ')}); see docs/gpu.md`;
}
