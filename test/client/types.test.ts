import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { ROOT, tempDir } from '../helpers/server.ts';

// The client package's types say what the service enforces (issue 39 item 6): an `ok` frame
// without source_size, eyes_xy or image is refused with a 422, so it must not compile. Each
// case is compiled alone with the package's own compiler settings; the valid ones must compile
// cleanly, so a case cannot pass by a typo.
t.setTimeout(240_000);
const dir = tempDir('lv-client-types-');
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const entry = path.join(ROOT, 'client/src/index.ts');

const head = `import { buildCapture, buildCaptureWith, type FrameInput, type FrameRecord } from ${JSON.stringify(path.relative(dir, entry).startsWith('.') ? path.relative(dir, entry) : `./${path.relative(dir, entry)}`)};
const crop = new Uint8Array(307200);
const eyes: [[number, number], [number, number]] = [[280, 200], [360, 202]];
export {};
`;
const cases: Record<string, { code: string; compiles: boolean }> = {
  'an ok frame with everything': { compiles: true, code: `const f: FrameInput = { timestamp_us: 0, source_size: [640, 480], eyes_xy: eyes, image: { bytes: crop } }; void buildCapture({ mode: 'rgb_single', frames: [f] });` },
  'events without image data': { compiles: true, code: `void buildCaptureWith({ mode: 'rgb_sequence', frames: [{ timestamp_us: 0, status: 'face_unavailable' }, { timestamp_us: 1, status: 'dropped' }] }, () => '');` },
  'an ok frame without eyes_xy': { compiles: false, code: `void buildCapture({ mode: 'rgb_single', frames: [{ timestamp_us: 0, source_size: [640, 480], image: { bytes: crop } }] });` },
  'a frame with status ok and no eyes_xy': { compiles: false, code: `const f: FrameInput = { timestamp_us: 0, status: 'ok', source_size: [640, 480], image: { bytes: crop } }; void f;` },
  'an ok frame without source_size': { compiles: false, code: `const f: FrameInput = { timestamp_us: 0, eyes_xy: eyes, image: { bytes: crop } }; void f;` },
  'an ok frame without its image': { compiles: false, code: `const f: FrameInput = { timestamp_us: 0, source_size: [640, 480], eyes_xy: eyes }; void f;` },
  'an ok wire record without eyes_xy': { compiles: false, code: `const r: FrameRecord = { source_index: 0, timestamp_us: 0, status: 'ok', source_size: [640, 480], image: { part: 'f0', encoding: 'rgb8', sha256: '' } }; void r;` },
};

const files = Object.keys(cases).map((name, i) => {
  const file = path.join(dir, `case${i}.mts`);
  fs.writeFileSync(file, head + cases[name]!.code + '\n');
  return { name, file };
});
const clientConfig = ts.parseJsonConfigFileContent(JSON.parse(fs.readFileSync(path.join(ROOT, 'client/tsconfig.json'), 'utf8')), ts.sys, path.join(ROOT, 'client'));
const options: ts.CompilerOptions = { ...clientConfig.options, noEmit: true, declaration: false, allowImportingTsExtensions: true, rootDir: undefined, outDir: undefined };
const program = ts.createProgram(files.map((f) => f.file), options);

for (const { name, file } of files) {
  t.test(name, async (t) => {
    const errors = ts.getPreEmitDiagnostics(program, program.getSourceFile(file)).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    if (cases[name]!.compiles) t.same(errors, [], 'compiles');
    else t.ok(errors.length > 0 && errors.every((e) => /Property '(eyes_xy|source_size|image)' is missing|is not assignable to type '(FrameInput|FrameRecord|OkFrameInput|OkFrameRecord)'/.test(e)), `does not compile, for the missing field: ${errors.join(' | ').replace(/\s+/g, ' ').slice(0, 200) || 'it compiled'}`);
  });
}
