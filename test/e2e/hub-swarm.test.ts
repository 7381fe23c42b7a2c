import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { computeModelId, openModelFile } from '../../shards/index.js'
import { cliAsync, ONE_LINE_ERROR } from '../helpers/cli-async.js'
import { type FakeHub, startFakeHub } from '../helpers/fake-hub.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

// Issue 33 item 6 as a user meets it: `--model hf://…` on a node and `--model org/repo:QUANT` on a
// client, against a local server that behaves like the Hub (this VM has no internet). Each
// process downloads into its own $LAYERSWARM_HOME, and the swarm gives the reference story.

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const bytes = new Uint8Array(readFileSync(GGUF_PATH))
const corrupted = bytes.slice()
corrupted[1000] ^= 0x40

describe('models from the Hub in a real swarm', () => {
  let hub: FakeHub
  const root = mkdtempSync(join(tmpdir(), 'models-hub-swarm-'))
  const nodes: LocalNode[] = []
  const env = (home: string): NodeJS.ProcessEnv => ({
    ...process.env,
    HF_ENDPOINT: hub.url,
    LAYERSWARM_HOME: join(root, home),
    HF_TOKEN: ''
  })

  beforeAll(async () => {
    hub = await startFakeHub({
      'tiny/stories': { files: [{ path: 'stories260K-F32.gguf', bytes }] },
      'tiny/gated': { files: [{ path: 'stories260K.gguf', bytes }], token: 'hf_right_token' },
      'tiny/broken': { files: [{ path: 'stories260K.gguf', bytes, served: corrupted }] }
    })
  })
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()))
    await hub?.close()
    rmSync(root, { recursive: true, force: true })
  })

  it('node start --model hf://… serves the downloaded file; generate --model org/repo:F32 gives the reference story', {
    timeout: 180_000
  }, async () => {
    const node = await startLocalNode({
      model: 'hf://tiny/stories/stories260K-F32.gguf',
      layers: '1:4',
      args: ['--announce-interval', '300'],
      env: env('node')
    })
    nodes.push(node)
    const m = openModelFile(GGUF_PATH)
    expect(node.modelId).toBe(computeModelId(m))
    m.close()
    expect(existsSync(join(root, 'node', 'models', 'hf', 'tiny', 'stories', 'stories260K-F32.gguf'))).toBe(true)
    const r = await cliAsync(
      [
        'generate',
        '--model',
        'tiny/stories:F32',
        '--bootstrap',
        node.addrs[0],
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '64',
        '--temperature',
        '0'
      ],
      120_000,
      env('client')
    )
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toBe(`${ref.text}\n`)
    expect(existsSync(join(root, 'client', 'models', 'hf', 'tiny', 'stories', 'stories260K-F32.gguf'))).toBe(true)
  })

  it('a gated repository without HF_TOKEN: one line, HUB_AUTH; with the token it downloads', { timeout: 60_000 }, async () => {
    const r = await cliAsync(
      ['generate', '--model', 'hf://tiny/gated/stories260K.gguf', '--prompt', 'x', '--max-tokens', '1'],
      60_000,
      env('gated')
    )
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(ONE_LINE_ERROR)
    expect(r.stderr).toMatch(/HF_TOKEN.*\(HUB_AUTH\)/)
    const ok = await cliAsync(
      ['generate', '--model', 'hf://tiny/gated/stories260K.gguf', '--prompt', 'Once', '--max-tokens', '2'],
      60_000,
      {
        ...env('gated'),
        HF_TOKEN: 'hf_right_token'
      }
    )
    expect(ok.status, ok.stderr).toBe(0)
  })

  it('a corrupted download: one line, HUB_CHECKSUM, and nothing left to open', { timeout: 60_000 }, async () => {
    const r = await cliAsync(
      ['generate', '--model', 'hf://tiny/broken/stories260K.gguf', '--prompt', 'x', '--max-tokens', '1'],
      60_000,
      env('broken')
    )
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(ONE_LINE_ERROR)
    expect(r.stderr).toMatch(/\(HUB_CHECKSUM\)/)
    expect(existsSync(join(root, 'broken', 'models', 'hf', 'tiny', 'broken', 'stories260K.gguf'))).toBe(false)
  })
})
