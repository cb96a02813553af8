// Whether this process's tests run the compiled build (dist/) or the sources through tsx: the
// build when it matches the sources, as `npm test` makes sure before tap starts
// (scripts/build-stamp.mjs); the sources when they changed since (a file run alone with
// `npx tap` after an edit), so a test never runs stale code. LV_TEST_FROM_SOURCE=1 forces them.
// One answer per process: servers and CLI runs (server.ts SERVICE_ARGS, CLI_ARGS) and the
// threads of engines started in this process (src/source-ext.ts startEngineThreadsFromBuild:
// the inference pool's and `auto`'s measurement threads run their bundles, not tsx compiling
// the sources again in each, ~0.5-1 CPU-s per engine start; issue 43) follow it alike.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { upToDate } from '../../scripts/build-stamp.mjs';
import { startEngineThreadsFromBuild } from '../../src/source-ext.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const FROM_BUILD: boolean = process.env.LV_TEST_FROM_SOURCE !== '1' && upToDate(ROOT);

if (FROM_BUILD) startEngineThreadsFromBuild(new URL('../../dist/src/', import.meta.url));
