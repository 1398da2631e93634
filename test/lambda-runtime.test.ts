import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { SSMClient } from '@aws-sdk/client-ssm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, resolveSecrets } from '../lib/config.js'
import { ssmParameterReader } from '../lib/lambda.js'

// A local endpoint speaking SSM's JSON protocol, so the real SDK client does the call.
let url = ''
const calls: Array<{ target: string; body: { Name: string; WithDecryption: boolean } }> = []
const server = createServer((req, res) => {
  let body = ''
  req.on('data', c => { body += c })
  req.on('end', () => {
    const parsed = JSON.parse(body)
    calls.push({ target: String(req.headers['x-amz-target']), body: parsed })
    if (parsed.Name === '/missing') {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' })
      res.end(JSON.stringify({ __type: 'ParameterNotFound', message: 'not found' }))
      return
    }
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' })
    res.end(JSON.stringify({ Parameter: { Name: parsed.Name, Type: 'SecureString', Value: 'postgres://app:pw-from-ssm@db:5432/app' } }))
  })
})
beforeAll(async () => {
  await new Promise<void>(r => server.listen(0, '127.0.0.1', r))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>(r => server.close(() => r())))
const reader = () => ssmParameterReader(() => new SSMClient({ endpoint: url, region: 'us-east-1', credentials: { accessKeyId: 't', secretAccessKey: 't' } }))

describe('cold-start secrets', () => {
  it('reads DATABASE_URL from the named SecureString, decrypted, when it is unset', async () => {
    const env = await resolveSecrets({ DATABASE_URL_SSM_PARAMETER: '/actions/dev/database-url' }, reader())
    expect(env.DATABASE_URL).toBe('postgres://app:pw-from-ssm@db:5432/app')
    expect(calls.at(-1)).toEqual({ target: 'AmazonSSM.GetParameter', body: { Name: '/actions/dev/database-url', WithDecryption: true } })
  })

  it('keeps an explicit DATABASE_URL and asks nothing', async () => {
    const before = calls.length
    const env = await resolveSecrets({ DATABASE_URL: 'postgres://x/y', DATABASE_URL_SSM_PARAMETER: '/p' }, reader())
    expect(env.DATABASE_URL).toBe('postgres://x/y')
    expect(calls.length).toBe(before)
  })

  it('fails the cold start with a config error naming the parameter when it cannot be read', async () => {
    const err = await resolveSecrets({ DATABASE_URL_SSM_PARAMETER: '/missing' }, reader()).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConfigError)
    expect(String(err)).toContain('DATABASE_URL_SSM_PARAMETER: could not read /missing (ParameterNotFound)')
  })
})
