import type { Test } from 'tap';

// A test that needs a tool from outside npm (Chromium, ffmpeg, Debian's PostgreSQL 15, nginx,
// systemd-analyze, SwiftShader's Vulkan driver, a mountable tmpfs) is skipped, with its reason
// in the summary, on a developer's machine that lacks the tool. On CI it must run: .ci/run
// installs every such tool and sets LV_REQUIRE_TOOLS=1, and there a missing tool fails the
// test, so a feature can never go untested behind a green run.
export const toolsRequired = process.env.LV_REQUIRE_TOOLS === '1';

/** Skips the test (a file's root `t` or a subtest) for `reason`, or fails it where tools are
 * required. The caller returns without running the test's body either way. */
export function missingTool(t: Test, reason: string): void {
  if (toolsRequired) {
    t.fail(`a tool this test needs is missing, and LV_REQUIRE_TOOLS=1 (CI) requires it: ${reason}`);
    t.end();
  } else {
    t.plan(0, reason);
  }
}
