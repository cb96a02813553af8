// `NODE_OPTIONS="--require <this file>" npm test`: each node process appends its own CPU (user +
// system, all its threads) at exit to $SUITE_CPU_LOG (default: suite-cpu.jsonl in the temporary
// folder), with TAP_CHILD_ID naming the test file it belongs to (bench/results/suite-cpu-s49.md).
// A process ended by SIGKILL writes nothing; a worker thread's line repeats its process's figure.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
// absolute, and in the environment, so that every child process writes to the same file
process.env.SUITE_CPU_LOG = path.resolve(process.env.SUITE_CPU_LOG ?? path.join(os.tmpdir(), 'suite-cpu.jsonl'));
const log = process.env.SUITE_CPU_LOG;
const start = Date.now();
process.on('exit', () => {
  try {
    const u = process.cpuUsage();
    fs.appendFileSync(log, JSON.stringify({
      pid: process.pid, ppid: process.ppid, child: process.env.TAP_CHILD_ID ?? null,
      argv: process.argv.slice(1, 4), user: u.user / 1e6, sys: u.system / 1e6, wall: (Date.now() - start) / 1e3,
    }) + '\n');
  } catch {}
});
