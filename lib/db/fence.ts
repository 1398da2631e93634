/**
 * The fence of every statement that writes a claimed event's outcome (record, release) is this test
 * and the lease its claim returned (`e.lease_until = lease`): an event re-claimed since is not touched.
 * The state is compared as text on purpose. Statistics are gathered while nothing is claimed, so the
 * planner takes `state = 'processing'` for one row and nests a rescan of every outcome inside a scan
 * of the claimed rows: quadratic in the events in flight (35 ms for 350 outcomes; seconds for more).
 * Compared as text, the state gets a default estimate, and the plan becomes a hash join or
 * primary-key lookups. `e` is the event row.
 */
export const PROCESSING = `e.state::text = 'processing'`
