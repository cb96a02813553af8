// The readiness note when WebGPU was wanted and Dawn found no adapter (src/inference/gpu-host.ts).
import t from 'tap';
import { noAdapterNote } from '../../src/inference/gpu-host.ts';

t.test('auto says nothing on a host without a GPU, and names the missing libraries on one with a GPU', async (t) => {
  t.equal(noAdapterNote('auto', null), null, 'a CPU-only host serving on the CPU is expected');
  const note = noAdapterNote('auto', '/dev/nvidia0')!;
  t.match(note, /the host has a GPU \(\/dev\/nvidia0\) but Dawn found no adapter, so the engine serves on the CPU/);
  for (const pkg of ['libvulkan1', 'libglvnd0', 'libgl1', 'libglx0', 'libegl1', 'libgles2', 'libopengl0']) t.ok(note.includes(pkg), pkg);
  t.match(note, /docs\/gpu\.md/);
});

t.test('an explicit webgpu always gets the note', async (t) => {
  t.match(noAdapterNote('webgpu', null), /^WebGPU unavailable: Dawn found no adapter, so the engine serves on WASM\. .*libvulkan1/);
  t.match(noAdapterNote('webgpu', '/dev/dri/renderD128'), /\(\/dev\/dri\/renderD128\)/);
});
