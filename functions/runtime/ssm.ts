// The SSM-held DATABASE_URL, read through Powertools Parameters.
import { GetParameterError } from '@aws-lambda-powertools/parameters/errors'
import { SSMProvider } from '@aws-lambda-powertools/parameters/ssm'
import type { SSMClient } from '@aws-sdk/client-ssm'
import type { ParameterReader } from '../../lib/config.js'

/** How long a SecureString read through Powertools stays cached in this environment (a re-read within it asks SSM nothing). */
export const SSM_CACHE_SECONDS = 300

/**
 * Reads a SecureString, decrypted, through Powertools' SSM provider, cached for SSM_CACHE_SECONDS (the
 * client is built on first use). A failed read rethrows the SDK's own error (ParameterNotFound,
 * AccessDeniedException, …), so the cold-start error names what SSM said, not Powertools' wrapper.
 */
export function ssmParameterReader(client: () => SSMClient, maxAgeSeconds = SSM_CACHE_SECONDS): ParameterReader & { forget(): void } {
  let provider: SSMProvider | undefined
  const read = async (name: string): Promise<string | undefined> => {
    provider ??= new SSMProvider({ awsSdkV3Client: client() })
    try {
      return await provider.get(name, { decrypt: true, maxAge: maxAgeSeconds })
    } catch (error) {
      throw error instanceof GetParameterError && error.cause !== undefined ? error.cause : error
    }
  }
  // A rotated secret: the next read goes to SSM whatever the cache's age.
  return Object.assign(read, { forget: () => provider?.clearCache() })
}
