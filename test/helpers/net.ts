// One implementation of free-port discovery, shared with the local stack.
export { freePort } from '../../local/postgres.js'
