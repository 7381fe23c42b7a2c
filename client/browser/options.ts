// Defaults of the browser client (client/browser/).

/** First ranged read of a GGUF: enough for the header of small vocabularies; doubled until it parses. */
export const HEADER_PREFETCH_BYTES = 2 * 1024 * 1024
/** A GGUF header larger than this is refused (a 150k-token vocabulary takes a few MiB). */
export const MAX_HEADER_BYTES = 256 * 1024 * 1024
/** Ranges closer than this are fetched as one request (fewer round trips, a few wasted bytes). */
export const RANGE_MERGE_GAP_BYTES = 64 * 1024
/** Range requests in flight at once (browsers open about six connections per origin). */
export const FETCH_CONCURRENCY = 4
/** Kernel threads of the client's edge blocks: the worker thread itself (no nested workers). */
export const BROWSER_KERNEL_THREADS = 1
