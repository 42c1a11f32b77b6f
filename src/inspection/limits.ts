/**
 * The inspection protocol's bounds: every answer is bounded whatever the object holds. A module of
 * their own so a capability's inspection source reads them without linking the protocol's Schemas
 * (a worker that never answers an inspector does not bundle those).
 * @internal
 */
/** Items per page when a request names no `limit`. */
export const DEFAULT_PAGE = 25
/** The most items one page may ask for (`limit` above it does not decode). */
export const MAX_PAGE = 100
/** Characters of one JSON value (payload, result, progress) in a list item. */
export const LIST_JSON_CHARS = 1_000
/** Characters of one JSON value in a job's detail, where a reader came to see more than a list shows. */
export const DETAIL_JSON_CHARS = 64_000
/** Characters of an error message, and of a log line, in any answer. */
export const MESSAGE_CHARS = 4_000
/** Running keys listed in the scheduler summary (the count is exact). */
export const MAX_RUNNING_LISTED = 100
/** Log lines in a job's detail (the total is exact). */
export const DETAIL_LOG_LINES = 100
/** Children listed in a job's detail (the total is exact). */
export const DETAIL_CHILDREN = 100
/**
 * Counts in the overview stop here: a count equal to it means at least that many (the page shows
 * "10 000+"). Each count reads at most this many index entries, so the overview costs the same for
 * 10 000 records as for 10 million.
 */
export const COUNT_CAP = 10_000
/**
 * The overview's rates count the jobs that finished over this last stretch of time (5 minutes), from
 * storage: they survive evictions, unlike the in-memory metrics.
 */
export const RATE_WINDOW_MS = 5 * 60_000
/** Ids one redrive may name. */
export const MAX_REDRIVE_IDS = 1_000
/** Steps in a workflow instance's detail (the total is counted up to `COUNT_CAP`; `WorkflowSteps` pages on). */
export const DETAIL_STEPS = 100
/** Events in a workflow instance's detail, oldest first (the total is counted up to `COUNT_CAP`; `WorkflowEvents` pages on). */
export const DETAIL_EVENTS = 100
/** Jobs one bulk action's chunk changes at most (one transaction; `Jobs.bulk`'s own bound). */
export const MAX_BULK_LIMIT = 500
