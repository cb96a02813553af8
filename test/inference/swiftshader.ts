// Where the tests find an emulated GPU: Debian's chromium ships SwiftShader, a Vulkan
// driver that runs on the CPU, and Dawn finds it when VK_ICD_FILENAMES names its manifest.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { tempDir } from '../helpers/server.ts';

/** The SwiftShader Vulkan manifest: the environment's, chromium's usual place, or what
 * dpkg says the chromium package installed. */
export function swiftShaderIcd(): string | null {
  const named = process.env.VK_ICD_FILENAMES;
  if (named && existsSync(named)) return named;
  if (existsSync('/usr/lib/chromium/vk_swiftshader_icd.json')) return '/usr/lib/chromium/vk_swiftshader_icd.json';
  try {
    const listed = execFileSync('dpkg', ['-L', 'chromium'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return listed.split('\n').find((l) => l.endsWith('vk_swiftshader_icd.json') && existsSync(l)) ?? null;
  } catch {
    return null;
  }
}

export const NO_ICD = 'no Vulkan driver found: install Debian\'s chromium (it ships SwiftShader) to run the WebGPU path';

/** The environment a child process needs to reach SwiftShader. chromium's folder also
 * holds the Vulkan loader (libvulkan.so.1), which is looked up when a process starts. */
export function swiftShaderEnv(icd: string): Record<string, string> {
  const libs = [dirname(icd), process.env.LD_LIBRARY_PATH].filter(Boolean).join(':');
  return { VK_ICD_FILENAMES: icd, LD_LIBRARY_PATH: libs, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? tempDir('xdg-') };
}
