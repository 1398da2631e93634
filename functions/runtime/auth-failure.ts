// Which failures mean the database refused the login: the one kind of error that renews a secret.
/** Postgres refused the login (SQLSTATE class 28: invalid password, unknown role, no pg_hba entry), here or in a cause. */
export function isAuthFailure(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    if ('code' in e && typeof e.code === 'string' && /^28[0-9A-Z]{3}$/.test(e.code)) return true
    e = 'cause' in e ? e.cause : undefined
  }
  return false
}
