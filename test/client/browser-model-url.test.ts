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
      code: 'ERR_MODEL_FETCH'
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
