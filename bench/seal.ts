/**
 * Sealing and opening throughput of KV snapshots: `npm run bench -- seal [--mib N] [--repeats R]`.
 * Seals an N MiB payload (default 64) with sealSnapshot into a reused output buffer and opens
 * it with openSnapshot into a reused plaintext buffer (the hot-path usage: no fresh large
 * allocations), best of R runs (default 5) after one warm-up. Also reports the first-run
 * numbers with fresh buffers. Prints one JSON object (MB = 10^6 bytes).
 */
import {
  openSnapshot,
  randomKey,
  type SnapshotHeader,
  sealedSnapshotSize,
  sealSnapshot,
  tokenPrefixHash
} from '../crypto/index.js'

function option(argv: string[], name: string, fallback: number): number {
  const i = argv.indexOf(name)
  if (i < 0) return fallback
  const v = Number(argv[i + 1])
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} needs a positive number`)
  return v
}

export async function main(argv: string[]): Promise<void> {
  const mib = option(argv, '--mib', 64)
  const repeats = Math.floor(option(argv, '--repeats', 5))
  const bytes = Math.floor(mib * 1024 * 1024)
  const key = randomKey()
  const header: SnapshotHeader = {
    modelId: 'bench-model',
    sessionId: 'bench-session',
    span: [0, 12],
    tokenRange: [0, 1024],
    prefixHash: tokenPrefixHash([1, 2, 3]),
    sequence: 1,
    clientId: '12D3KooWbenchclient',
    kind: 'full',
    dtype: 'f16'
  }
  const payload = new Uint8Array(bytes)
  for (let i = 0; i < bytes; i += 4096) payload[i] = i & 0xff
  const expect = {
    modelId: header.modelId,
    sessionId: header.sessionId,
    span: header.span,
    clientId: header.clientId,
    minSequence: 1
  }
  const mbps = (ms: number) => Math.round(bytes / 1e6 / (ms / 1000))

  // First run with fresh buffers (what an unpooled caller pays).
  let t = performance.now()
  const fresh = sealSnapshot({ key, header, payload })
  const freshSeal = performance.now() - t
  t = performance.now()
  openSnapshot(fresh, key, expect)
  const freshOpen = performance.now() - t

  const sealed = new Uint8Array(sealedSnapshotSize(header, bytes))
  const plain = new Uint8Array(bytes)
  sealSnapshot({ key, header, payload, out: sealed })
  openSnapshot(sealed, key, expect, plain)
  let bestSeal = Number.POSITIVE_INFINITY
  let bestOpen = Number.POSITIVE_INFINITY
  for (let r = 0; r < repeats; r++) {
    t = performance.now()
    sealSnapshot({ key, header, payload, out: sealed })
    bestSeal = Math.min(bestSeal, performance.now() - t)
    t = performance.now()
    openSnapshot(sealed, key, expect, plain)
    bestOpen = Math.min(bestOpen, performance.now() - t)
  }
  for (let i = 0; i < bytes; i += 4096) if (plain[i] !== payload[i]) throw new Error('round trip mismatch')
  console.log(
    JSON.stringify(
      {
        bench: 'seal',
        cipher: 'AES-256-GCM (node:crypto)',
        payloadMiB: mib,
        repeats,
        sealMBps: mbps(bestSeal),
        openMBps: mbps(bestOpen),
        sealMs: Number(bestSeal.toFixed(2)),
        openMs: Number(bestOpen.toFixed(2)),
        freshBuffers: { sealMBps: mbps(freshSeal), openMBps: mbps(freshOpen) }
      },
      null,
      2
    )
  )
}
