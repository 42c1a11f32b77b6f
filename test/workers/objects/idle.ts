/**
 * How a test object tells a scenario it is idle, so the scenario can end without leaving it running (the
 * pool's isolated storage then meets a `.sqlite-shm` side file). A null alarm alone is not enough: inside
 * an `alarm()` delivery the platform already reports no alarm, so the delivery in flight is counted too.
 */

export interface Idleness {
  /** The platform alarm, as `getAlarm()` reports it. */
  readonly alarm: number | null
  /** `alarm()` deliveries running in this instance (a reset ends them with the instance). */
  readonly delivering: number
}

export const IDLE: Idleness = { alarm: null, delivering: 0 }

export const isIdle = (state: Idleness): boolean => state.alarm === null && state.delivering === 0

/** Counts an object's `alarm()` deliveries in flight; one per instance. */
export class Deliveries {
  private running = 0

  async around(deliver: () => Promise<void>): Promise<void> {
    this.running++
    try {
      await deliver()
    } finally {
      this.running--
    }
  }

  /** Deliveries are counted on both sides of the alarm's read, so one that ends during it still counts. */
  async idleness(storage: DurableObjectStorage): Promise<Idleness> {
    const before = this.running
    const alarm = await storage.getAlarm()
    return { alarm, delivering: Math.max(before, this.running) }
  }
}
