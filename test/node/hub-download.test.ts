import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { formatEta } from '../../node/cli/commands/model-source.js'
import { HubAuthError, HubChecksumError, HubNotFoundError, InvalidModelSourceError } from '../../node/errors.js'
import { downloadHubModel, type HubProgress } from '../../node/hub-download.js'
import { parseHubSource } from '../../node/hub-source.js'
import { computeModelId, openModelFile } from '../../shards/index.js'
import { type FakeHub, startFakeHub } from '../helpers/fake-hub.js'

// Issue 33 item 6: models from the Hugging Face Hub, tested against a local server that behaves
// like the Hub (this VM has no internet). The payload is the real bundled GGUF.

const MODEL = join(import.meta.dirname, '..', '..', 'models', 'stories260K.gguf')
const bytes = new Uint8Array(readFileSync(MODEL))
const corrupted = bytes.slice()
corrupted[corrupted.length - 100] ^= 0x01
const sha = createHash('sha256').update(bytes).digest('hex')

describe('Hub downloads (hf://org/repo/file.gguf, org/repo:QUANT)', () => {
  let hub: FakeHub
  let home: string
  const env = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
    HF_ENDPOINT: hub.url,
    LAYERSWARM_HOME: home,
    ...extra
  })

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'models-hub-'))
    hub = await startFakeHub({
      'tiny/stories': {
        files: [
          { path: 'stories260K-F32.gguf', bytes },
          { path: 'stories260K-Q8_0.gguf', bytes },
          { path: 'split/stories260K-Q4_K_M-00001-of-00002.gguf', bytes }
        ]
      },
      'tiny/gated': { files: [{ path: 'stories260K.gguf', bytes }], token: 'hf_secret_token' },
      'tiny/broken': { files: [{ path: 'stories260K.gguf', bytes, served: corrupted }] }
    })
  })
  afterAll(async () => {
    await hub?.close()
    rmSync(home, { recursive: true, force: true })
  })

  it('parses both shapes and refuses malformed ones with a typed error', () => {
    expect(parseHubSource('hf://org/repo/dir/m.gguf')).toEqual({ repo: 'org/repo', revision: 'main', file: 'dir/m.gguf' })
    expect(parseHubSource('hf://org/repo@v2/m.gguf')).toEqual({ repo: 'org/repo', revision: 'v2', file: 'm.gguf' })
    expect(parseHubSource('org/repo:Q4_K_M')).toEqual({ repo: 'org/repo', revision: 'main', quant: 'Q4_K_M' })
    expect(parseHubSource('models/stories260K.gguf')).toBeUndefined()
    expect(() => parseHubSource('hf://org/m.gguf')).toThrow(InvalidModelSourceError)
    expect(() => parseHubSource('hf://org/../m.gguf')).toThrow(InvalidModelSourceError)
    expect(() => parseHubSource('org/repo:Q4-K')).toThrow(InvalidModelSourceError)
    expect(formatEta(75_000)).toBe('1:15')
    expect(formatEta(3_700_000)).toBe('1:01:40')
  })

  it('downloads through the 302 to the CDN, checks the sha256, and finds it verified the second time', async () => {
    const seen: HubProgress[] = []
    const d = await downloadHubModel('hf://tiny/stories/stories260K-F32.gguf', { env: env(), onProgress: (p) => seen.push(p) })
    expect(d.path).toBe(join(home, 'models', 'hf', 'tiny', 'stories', 'stories260K-F32.gguf'))
    expect(d).toMatchObject({ cached: false, fetchedBytes: bytes.byteLength, bytes: bytes.byteLength, sha256: sha })
    expect(seen.at(-1)?.bytes).toBe(bytes.byteLength)
    expect(seen.at(-1)?.totalBytes).toBe(bytes.byteLength)
    // the engine opens it and it is the same model (same id) as the bundled file
    const a = openModelFile(d.path)
    const b = openModelFile(MODEL)
    expect(computeModelId(a)).toBe(computeModelId(b))
    a.close()
    b.close()
    const before = hub.requests.length
    const again = await downloadHubModel('hf://tiny/stories/stories260K-F32.gguf', { env: env() })
    expect(again).toMatchObject({ cached: true, fetchedBytes: 0, path: d.path })
    expect(hub.requests.slice(before).filter((r) => r.url.startsWith('/cdn/'))).toEqual([]) // only the HEAD
  })

  it('org/repo:QUANT picks the whole GGUF of that quantisation from the file list', async () => {
    const d = await downloadHubModel('tiny/stories:q8_0', { env: env() })
    expect(d.file).toBe('stories260K-Q8_0.gguf')
    expect(hub.requests.some((r) => r.url === '/api/models/tiny/stories/tree/main?recursive=true')).toBe(true)
    await expect(downloadHubModel('tiny/stories:Q4_K_M', { env: env() })).rejects.toThrow(/split GGUF/)
    await expect(downloadHubModel('tiny/stories:Q5_K_M', { env: env() })).rejects.toBeInstanceOf(HubNotFoundError)
  })

  it('a connection dropped mid-file resumes with a Range request and fetches each byte once', async () => {
    hub.dropNext = 1
    const mark = hub.requests.length
    const d = await downloadHubModel('hf://tiny/stories/stories260K-Q8_0.gguf', {
      env: env({ LAYERSWARM_HOME: join(home, 'drop') }),
      retryDelayMs: 10
    })
    const cdn = hub.requests.slice(mark).filter((r) => r.url.startsWith('/cdn/') && r.method === 'GET')
    expect(cdn.length).toBe(2)
    expect(cdn[0].range).toBeUndefined()
    expect(cdn[1].range).toMatch(/^bytes=[1-9]\d*-$/)
    expect(d.fetchedBytes).toBe(bytes.byteLength)
    expect(createHash('sha256').update(readFileSync(d.path)).digest('hex')).toBe(sha)
  })

  it('a part left by a killed download is resumed from where it stopped', async () => {
    const dir = join(home, 'killed', 'models', 'hf', 'tiny', 'stories')
    mkdirSync(dir, { recursive: true })
    const have = 100_000
    writeFileSync(join(dir, 'stories260K-F32.gguf.part'), bytes.subarray(0, have))
    writeFileSync(join(dir, 'stories260K-F32.gguf.part.etag'), sha)
    const mark = hub.requests.length
    const d = await downloadHubModel('hf://tiny/stories/stories260K-F32.gguf', {
      env: env({ LAYERSWARM_HOME: join(home, 'killed') })
    })
    expect(hub.requests.slice(mark).find((r) => r.url.startsWith('/cdn/'))?.range).toBe(`bytes=${have}-`)
    expect(d.fetchedBytes).toBe(bytes.byteLength - have)
    expect(createHash('sha256').update(readFileSync(d.path)).digest('hex')).toBe(sha)
  })

  it('a gated repository: 401 without HF_TOKEN (typed, says what to do), served with it', async () => {
    const err = await downloadHubModel('hf://tiny/gated/stories260K.gguf', { env: env() }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(HubAuthError)
    expect((err as HubAuthError).code).toBe('HUB_AUTH')
    expect((err as Error).message).toMatch(/HF_TOKEN/)
    const d = await downloadHubModel('hf://tiny/gated/stories260K.gguf', { env: env({ HF_TOKEN: 'hf_secret_token' }) })
    expect(d.sha256).toBe(sha)
    expect(hub.requests.at(-1)?.auth).toBe('Bearer hf_secret_token')
  })

  it('a corrupted download is refused by its sha256 and deleted', async () => {
    const err = await downloadHubModel('hf://tiny/broken/stories260K.gguf', { env: env() }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(HubChecksumError)
    expect((err as HubChecksumError).code).toBe('HUB_CHECKSUM')
    const path = join(home, 'models', 'hf', 'tiny', 'broken', 'stories260K.gguf')
    expect(existsSync(path)).toBe(false)
    expect(existsSync(`${path}.part`)).toBe(false)
  })
})
