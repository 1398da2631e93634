// The shared deadline timer: each request's deadline fires on its own time, whatever the order they
// were started in, and the timer is gone once nothing is in flight.
import { describe, expect, it } from 'vitest'
import { endDeadline, startDeadline } from '../../lib/delivery/deadlines.js'

const aborted = (d: ReturnType<typeof startDeadline>) => new Promise<number>(resolve => d.signal.once('abort', () => resolve(performance.now())))

describe('deadlines', () => {
  it('fires a short deadline started after a long one at its own time, and only the expired one', async () => {
    const t0 = performance.now()
    const long = startDeadline(10_000)
    const short = startDeadline(50)
    const at = await aborted(short)
    expect(short.expired).toBe(true)
    expect(at - t0).toBeGreaterThanOrEqual(49)
    expect(long.expired).toBe(false)
    endDeadline(long)
    endDeadline(short)
  })

  it('fires deadlines that share a timeout one after the other', async () => {
    const a = startDeadline(30)
    const b = startDeadline(60)
    await aborted(a)
    expect([a.expired, b.expired]).toEqual([true, false])
    await aborted(b)
    expect(b.expired).toBe(true)
  })

  it('never fires an ended deadline', async () => {
    const d = startDeadline(20)
    let fired = false
    d.signal.once('abort', () => { fired = true })
    endDeadline(d)
    const other = startDeadline(60)
    await aborted(other)
    expect(fired).toBe(false)
    expect(d.expired).toBe(false)
  })

  it('holds no timer once no deadline is live, so an idle process can exit', async () => {
    const before = process.getActiveResourcesInfo().filter(r => r === 'Timeout').length
    const d = startDeadline(60_000)
    expect(process.getActiveResourcesInfo().filter(r => r === 'Timeout').length).toBe(before + 1)
    endDeadline(d)
    expect(process.getActiveResourcesInfo().filter(r => r === 'Timeout').length).toBe(before)
  })
})
