// Types of build-stamp.mjs for the TypeScript that imports it (the test harness).
export function inputHash(root: string): string;
export function upToDate(root: string): boolean;
/** each thread's entry and its bundle in dist/src/ */
export const BUNDLES: readonly { entry: string; bundle: string }[];
/** what the build writes that the service and the CLI start from */
export const BUILD_OUTPUTS: readonly string[];
