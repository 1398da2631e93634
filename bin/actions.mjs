#!/usr/bin/env node
// The operator CLI is TypeScript; tsx compiles it on the fly so `npx actions …` needs no build step.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('../lib/cli/main.ts')
process.exitCode = await main(process.argv.slice(2))
