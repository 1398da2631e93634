/** Epoch milliseconds with sub-millisecond precision, comparable across the bench's processes. */
export const now = (): number => performance.timeOrigin + performance.now()
