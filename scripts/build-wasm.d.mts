// Types of build-wasm.mjs for the TypeScript that imports it (the tests).
/** the .wat files under src/, relative to the repository */
export function watFiles(dir?: string): string[];
/** the WebAssembly binary of a .wat file */
export function compileWat(file: string): Promise<Uint8Array>;
/** the TypeScript module that holds the bytes */
export function moduleSource(file: string, bytes: Uint8Array): string;
/** X.wat -> X-wasm.ts */
export function targetOf(file: string): string;
