// The browser client's model loading (client/browser/model-url.ts) over real HTTP range requests,
// served by the gateway's own Range parser (node/gateway/browser-routes.ts), in Node's fetch.
import { readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mergeRanges, openModelUrl, RangeNotFetchedError, RangeNotSupportedError } from '../../client/browser/index.js'
import { parseRange } from '../../node/gateway/browser-routes.js'
import { computeModelId, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

const file = readFileSync(GGUF_PATH)
let server: Server
let base = ''
const requests: string[] = []

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push(`${req.url} ${req.headers.range ?? ''}`)
    if (req.url === '/no-range.gguf') return res.writeHead(200).end(file)
    if (req.url !== '/m.gguf') return res.writeHead(404).end()
    try {
      const r = parseRange(req.headers.range, file.length)
      if (!r) return res.writeHead(200).end(file)
      res.writeHead(206, { 'content-range': `bytes ${r[0]}-${r[1]}/${file.length}` }).end(file.subarray(r[0], r[1] + 1))
    } catch {
      res.writeHead(416).end()
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

describe('openModelUrl', () => {
  it('with the head on a peer (headSecretRows): runs of head rows only, read as from the file; the rest refused', async () => {
    const o = { url: `${base}/m.gguf`, edgeFirst: 1, edgeLast: 0, headerPrefetchBytes: 4096, mergeGapBytes: 0 }
    const whole = await openModelUrl(o)
    const thin = await openModelUrl({ ...o, headSecretRows: 64 })
    const local = openModelFile(GGUF_PATH)
    try {
      expect(whole.headReadable).toBeUndefined()
      const held = Array.from({ length: 512 }, (_, id) => id).filter((id) => thin.headReadable?.(id))
      expect(held.length).toBe(64) // 2 runs of 32 of the 512 rows
      // 448 rows of 64 f32 (112 KiB) less, less the id samples at the head's ends (8 KiB at most)
      expect(whole.fetchedBytes - thin.fetchedBytes).toBeGreaterThanOrEqual(448 * 256 - 8192)
      expect(computeModelId(thin.model)).toBe(computeModelId(local))
      const rows = thin.model.readMatrixRows
      expect(rows).toBeDefined()
      for (const id of held) {
        const mine = thin.model.readMatrixRows?.('output', id, 1).data as Uint8Array
        const theirs = local.readMatrixRows?.('output', id, 1).data as Uint8Array
        expect(Buffer.from(mine).equals(Buffer.from(theirs))).toBe(true)
      }
      const missing = Array.from({ length: 512 }, (_, id) => id).find((id) => !thin.headReadable?.(id) && id > 16 && id < 496)
      expect(() => thin.model.readMatrixRows?.('output', missing as number, 1)).toThrow(RangeNotFetchedError)
    } finally {
      local.close()
      whole.model.close()
      thin.model.close()
    }
  })

  it('fetches the header, the edge tensors and id samples only; same config and model id as the file', async () => {
    requests.length = 0
    const { model, fetchedBytes, totalBytes } = await openModelUrl({
      url: `${base}/m.gguf`,
      edgeFirst: 1,
      edgeLast: 1,
      headerPrefetchBytes: 4096,
      mergeGapBytes: 0 // the bundled model's tensors are small: the default gap would fetch them all as one
    })
    const local = openModelFile(GGUF_PATH)
    expect(totalBytes).toBe(file.length)
    expect(fetchedBytes).toBeLessThan(totalBytes * 0.75)
    expect(requests.every((r) => r.includes('bytes='))).toBe(true)
    expect(model.config).toEqual(local.config)
    expect(computeModelId(model)).toBe(computeModelId(local))
    // the client's own tensors read exactly as from the file
    for (const name of ['token_embd', 'blk.0.attn_q', 'blk.4.ffn_down'] as const)
      expect(Buffer.from(model.readMatrix(name).data).equals(Buffer.from(local.readMatrix(name).data))).toBe(true)
    expect(model.readVector('output_norm')).toEqual(local.readVector('output_norm'))
    // a peer's block was never downloaded: a typed error, not a silent zero
    expect(() => model.readMatrix('blk.2.attn_q')).toThrow(RangeNotFetchedError)
    local.close()
    model.close()
  })

  it('a server that ignores Range is a typed error; so is an HTTP error', async () => {
    await expect(openModelUrl({ url: `${base}/no-range.gguf`, edgeFirst: 1, edgeLast: 1 })).rejects.toBeInstanceOf(
      RangeNotSupportedError
    )
    await expect(openModelUrl({ url: `${base}/missing.gguf`, edgeFirst: 1, edgeLast: 1 })).rejects.toMatchObject({
      code: 'MODEL_FETCH'
    })
  })
})

describe('ranges', () => {
  it('mergeRanges joins ranges closer than the gap', () => {
    expect(
      mergeRanges(
        [
          [100, 200],
          [0, 10],
          [205, 300],
          [1000, 1000]
        ],
        10
      )
    ).toEqual([
      [0, 10],
      [100, 300]
    ])
  })
  it('parseRange: start-end, open end, suffix; unsatisfiable ones throw 416', () => {
    expect(parseRange(undefined, 100)).toBeNull()
    expect(parseRange('bytes=0-9', 100)).toEqual([0, 9])
    expect(parseRange('bytes=90-', 100)).toEqual([90, 99])
    expect(parseRange('bytes=50-500', 100)).toEqual([50, 99])
    expect(parseRange('bytes=-10', 100)).toEqual([90, 99])
    for (const bad of ['bytes=100-', 'bytes=5-1', 'bytes=0-1,5-6', 'items=0-1', 'bytes=-0', 'bytes=-'])
      expect(() => parseRange(bad, 100)).toThrow(expect.objectContaining({ status: 416 }))
  })
})
