import type { HubProgress } from '../../hub-download.js'

const MB = 1024 * 1024

/** One line on a terminal, redrawn at most 10 times a second: bytes, percent, rate and time left; nothing in a pipe. */
export function progressLine(label: string, stream: NodeJS.WriteStream): { draw(p: HubProgress): void; done(): void } {
  if (stream.isTTY !== true) return { draw() {}, done() {} }
  let last = 0
  let drawn = false
  return {
    draw(p) {
      const now = performance.now()
      if (now - last < 100 && p.bytes < p.totalBytes) return
      last = now
      drawn = true
      const pct = p.totalBytes > 0 ? (100 * p.bytes) / p.totalBytes : 100
      const eta = p.etaMs === undefined ? '--' : formatEta(p.etaMs)
      stream.write(
        `\r\x1b[2K${label} ${(p.bytes / MB).toFixed(1)}/${(p.totalBytes / MB).toFixed(1)} MB ${pct.toFixed(0).padStart(3)}% ${(p.bytesPerSecond / MB).toFixed(1)} MB/s ETA ${eta}`
      )
    },
    done() {
      if (drawn) stream.write('\n')
    }
  }
}

/** 75 s → "1:15", 3700 s → "1:01:40". */
export function formatEta(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000))
  const hh = Math.floor(s / 3600)
  const mm = Math.floor((s % 3600) / 60)
  const ss = String(s % 60).padStart(2, '0')
  return hh > 0 ? `${hh}:${String(mm).padStart(2, '0')}:${ss}` : `${mm}:${ss}`
}
