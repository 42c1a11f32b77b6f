/**
 * The promise face's errors of a lease held outside the object (a Queues consumer, a worker): plain
 * `Error`s named like the Effect face's tags. They live with the jobs because the consumer aborts its
 * handlers' signals with them on either face; the promise face exports these classes (`facade/errors.ts`).
 * @internal
 */

/**
 * A lease's token no longer holds its job (expired, reclaimed, leased again, settled); nothing was
 * written. A plain `Error` named like the Effect face's tag (`Errors.StaleLeaseError`): it is what
 * a queued job's signal is aborted with and its writes reject with, on either face.
 */
export class StaleLeaseError extends Error {
  /** Always `"StaleLeaseError"`, so the error can be told apart after it crossed an RPC or a `catch`. */
  override readonly name = "StaleLeaseError" as const
  /**
   * Set when the job was canceled while this token held it (`heartbeat` and `log` of the lease API): stop,
   * the job will not run again. Read from the Effect face's error this one stands for (its `cause`).
   */
  readonly canceled?: { readonly reason: string }
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super(message, options)
    const canceled = (options?.cause as { readonly canceled?: unknown } | undefined)?.canceled
    if (typeof canceled === "object" && canceled !== null && typeof (canceled as { reason?: unknown }).reason === "string") {
      this.canceled = { reason: (canceled as { reason: string }).reason }
    }
  }
}

/**
 * A job was canceled (`cancel`): a running handler's signal is aborted with this error, in the object
 * or, through its next heartbeat, in an external worker or Queues consumer; the job is not retried.
 */
export class JobCanceledError extends Error {
  /** Always `"JobCanceledError"`, so the error can be told apart after it crossed an RPC or a `catch`. */
  override readonly name = "JobCanceledError" as const
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super(message, options)
  }
}
