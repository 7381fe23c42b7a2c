/** Info requests of one refresh in flight at once (issue #38). */
export const INFO_CONCURRENCY = 32

/** Run `f` over `items`, at most `limit` at a time. */
export async function forEachLimited<T>(items: readonly T[], limit: number, f: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < items.length) await f(items[next++])
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}
