import { runCommand } from './main.ts';

// The operator CLI's program (`npm run cli`, dist/src/cli/main.js once built): the process's own
// streams, environment and folder handed to runCommand (main.ts), which the tests also call
// in-process. Its exit code becomes the process's; nothing else here.
process.exitCode = await runCommand(process.argv.slice(2), { env: process.env, cwd: process.cwd(), stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
