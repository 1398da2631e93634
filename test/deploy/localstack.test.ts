import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { parseNetworks } from '../../lib/delivery/egress.js'

const read = (path: string) => readFile(new URL(`../../${path}`, import.meta.url), 'utf8')

describe('the LocalStack stage', () => {
  it('allows its compose network to the egress guard, so receivers on it are not refused', async () => {
    const compose = await read('infra/docker-compose.yml')
    const template = await read('serverless.yml')
    const subnet = /ipam:\s+config:\s+- subnet: (\S+)/.exec(compose)?.[1]
    expect(subnet, 'infra/docker-compose.yml pins the network range').toBeDefined()
    // The `local:` block of serverless.yml's params, up to the next top-level key.
    const localParams = /\n {2}local:\n((?: {4}.*\n|\n)+)/.exec(template)?.[1] ?? ''
    const allowed = /webhookAllowedNetworks: (\S+)/.exec(localParams)?.[1]
    expect(allowed).toBe(subnet)
    expect(parseNetworks(allowed ?? '').invalid).toEqual([])
  })
})
