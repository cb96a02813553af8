import fs from 'node:fs/promises';
import path from 'node:path';

/** Demo tokens' uploads are archived per UTC day (spec Limits: images of designated demo
 * tokens are archived); other tokens' images never touch the disk. Part names are arbitrary
 * client strings, so files are numbered and the names kept in the metadata file. */
export async function archiveDemoUpload(
  dataDir: string,
  at: number,
  requestId: string,
  metadata: string,
  parts: { name: string; bytes: Uint8Array }[],
): Promise<string> {
  const day = new Date(at).toISOString().slice(0, 10);
  const dir = path.join(dataDir, 'archive', day, requestId);
  await fs.mkdir(dir, { recursive: true });
  const index = parts.map((p, i) => ({ file: `part-${String(i).padStart(3, '0')}.bin`, part: p.name, bytes: p.bytes.byteLength }));
  await Promise.all(parts.map((p, i) => fs.writeFile(path.join(dir, index[i]!.file), p.bytes)));
  await fs.writeFile(path.join(dir, 'metadata.json'), metadata);
  await fs.writeFile(path.join(dir, 'parts.json'), JSON.stringify(index, null, 2));
  return dir;
}
