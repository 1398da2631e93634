import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file gets its own database; two workers keep a 2-core machine responsive.
    pool: 'forks',
    maxWorkers: 2,
    // Lambda runs Node 22; the SDK's notice about Node 20 is noise in test output.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
})
