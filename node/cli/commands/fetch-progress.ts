/**
 * Issue 33: the progress line of a weights fetch, with rate and ETA. It draws only on a terminal
 * (in a pipe, tests and logs read the JSON lines instead).
 */
export function fetchProgress(
  label: string,
  stream: NodeJS.WriteStream = process.stderr
): {
  update(doneBytes: number, totalBytes: number): void
  done(): void
} {
  if (stream.isTTY !== true) return { update() {}, done() {} }
  const started = performance.now()
  let first: number | undefined
  let last = 0
  return {
    update(done, total) {
      const now = performance.now()
      first ??= done
      if (now - last < 100 && done < total) return
      last = now
      const secs = (now - started) / 1000
      const rate = secs > 0 ? (done - first) / secs : 0
      const eta = rate > 0 ? Math.ceil((total - done) / rate) : undefined
      const mb = (b: number): string => (b / 1e6).toFixed(1)
      const pct = total > 0 ? Math.floor((done / total) * 100) : 100
      stream.write(
        `\r\x1b[2K${label} ${pct}% ${mb(done)}/${mb(total)} MB ${mb(rate)} MB/s${eta !== undefined ? ` ETA ${eta}s` : ''}`
      )
    },
    done() {
      stream.write('\n')
    }
  }
}
