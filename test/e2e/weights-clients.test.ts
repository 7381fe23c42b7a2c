import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runApi } from '../../node/cli/commands/api.js'
import { runModelsApi } from '../../node/cli/commands/api-models.js'
import { chooseModelByDemand } from '../../node/cli/commands/join-model.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createLogger } from '../../node/log.js'
import { parseShape, writeRandomModel } from '../../shards/index.js'
import { CLI } from '../helpers/cli.js'
import { cliAsync } from '../helpers/cli-async.js'
import { gatewayOptions, localGreedy } from '../helpers/gateway-api.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 33, session 4: clients by content id. A seed node holds the file; a gateway started with
// only the content id (`api --model-id`) fetches its edge from the swarm and serves the OpenAI
// API under that id, token-equal to one process; it seeds what it fetched, so a second client
// (`generate --model-id`) fetches chunks from the gateway. A second model (seed B) shares the
// swarm: `join --model-id auto` picks by demand against supply (node/daemon/placement/model-demand.ts):
// B while nobody asks for either (it has the smaller share of blocks served), A once the
// gateway's clients have asked A for tokens. Separate processes, real libp2p.

const ANNOUNCE = ['--announce-interval', '300']

interface GatewayLine {
  url: string
  model: string
  peerId: string
  addrs: string[]
  contentId: string
  weights: { fileBytes: number; edgeBytes: number; canaryBytes: number; fetchedBytes: number }
}

describe('clients by content id: the gateway fetches, serves and seeds (issue 33)', () => {
  const homes: string[] = []
  let seed: LocalNode
  let seedB: LocalNode
  let gateway: ChildProcess | undefined
  let line: GatewayLine
  const gatewayLogs: string[] = []
  let contentId = ''
  const home = (): NodeJS.ProcessEnv => {
    const h = mkdtempSync(join(tmpdir(), 'weights-clients-'))
    homes.push(h)
    return { ...process.env, LAYERSWARM_HOME: h, HOME: h }
  }

  beforeAll(async () => {
    seed = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args: ANNOUNCE, env: home() })
    contentId = (seed as unknown as { contentId: string }).contentId
    // model B: 4 blocks, only block 1 served (25 %); model A: blocks 1-3 of 5 (60 %)
    const dirB = mkdtempSync(join(tmpdir(), 'weights-clients-b-'))
    homes.push(dirB)
    writeRandomModel(join(dirB, 'b.gguf'), parseShape('64,4,4,2,128,300,untied'), { dtype: 'q8_0', seed: 5, seqLen: 128 })
    seedB = await startLocalNode({
      model: join(dirB, 'b.gguf'),
      layers: '1:2',
      bootstrap: [seed.addrs[0]],
      args: ANNOUNCE,
      env: home()
    })
    gateway = spawn(
      process.execPath,
      [CLI, 'api', '--model-id', contentId, '--bootstrap', seed.addrs[0], '--listen', '127.0.0.1:0'].concat([
        '--p2p-listen',
        '/ip4/127.0.0.1/tcp/0',
        '--canary-rate',
        '0',
        '--wire',
        'f32',
        '--log-level',
        'warn'
      ]),
      { env: home(), stdio: ['ignore', 'pipe', 'pipe'] }
    )
    createInterface({ input: gateway.stderr! }).on('line', (l) => gatewayLogs.push(l))
    const first = await new Promise<string>((resolve, reject) => {
      createInterface({ input: gateway!.stdout! }).once('line', resolve)
      gateway!.once('exit', (code) => reject(new Error(`api exited ${code}:\n${gatewayLogs.join('\n')}`)))
    })
    line = JSON.parse(first) as GatewayLine
  }, 240_000)

  afterAll(async () => {
    if (gateway && gateway.exitCode === null) {
      gateway.kill('SIGTERM')
      await once(gateway, 'exit')
    }
    await seedB?.stop()
    await seed?.stop()
    for (const h of homes) rmSync(h, { recursive: true, force: true })
  })

  it('join --model-id auto: with no demand anywhere, the model with the smaller share served (B) ranks first', async () => {
    const { contentId: first, ranking } = await chooseModelByDemand([seed.addrs[0], seedB.addrs[0]])
    expect(ranking.map((r) => r.modelId).sort()).toEqual([seed.modelId, seedB.modelId].sort())
    expect(ranking.every((r) => r.demandTokensPerMinute === 0)).toBe(true)
    expect(first).toBe((seedB as unknown as { contentId: string }).contentId)
  })

  it('api --model-id fetched only its edge and lists the model by id, with its readable name', async () => {
    expect(line.contentId).toBe(contentId)
    expect(line.model).toBe(contentId)
    expect(line.weights.canaryBytes).toBe(0)
    expect(line.weights.fetchedBytes).toBe(line.weights.edgeBytes)
    expect(line.weights.edgeBytes).toBeLessThan(line.weights.fileBytes)
    const models = (await (await fetch(`${line.url}/v1/models`)).json()) as {
      data: Array<{ id: string; layerswarm: { model_id: string; name: string } }>
    }
    expect(models.data.map((m) => m.id)).toEqual([contentId])
    expect(models.data[0].layerswarm.model_id).toBe(seed.modelId)
    expect(models.data[0].layerswarm.name.length).toBeGreaterThan(0)
  })

  it('the gateway started by id answers a completion token-equal to one process', { timeout: 180_000 }, async () => {
    const prompt = 'Once upon a time'
    const local = await localGreedy(GGUF_PATH, prompt, 24)
    const res = await fetch(`${line.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: contentId, prompt, max_tokens: 24, temperature: 0 })
    })
    expect(res.status).toBe(200)
    const j = (await res.json()) as { model: string; choices: Array<{ text: string }> }
    expect(j.model).toBe(contentId)
    expect(j.choices[0].text).toBe(local.completion)
  })

  it('a second client fetches chunks from the gateway, which seeds what it fetched', { timeout: 180_000 }, async () => {
    const gw = line.addrs.find((a) => a.startsWith('/ip4/127.0.0.1/'))!
    const r = await cliAsync(
      ['generate', '--model-id', contentId, '--bootstrap', `${gw},${seed.addrs[0]}`, '--prompt', 'Once upon a time'].concat([
        '--max-tokens',
        '8',
        '--temperature',
        '0',
        '--canary-rate',
        '0',
        '--no-seed-weights',
        '--json'
      ]),
      170_000,
      home()
    )
    expect(r.stderr).not.toMatch(/layerswarm:.*\(/)
    expect(r.status).toBe(0)
    const j = JSON.parse(r.stdout) as {
      text: string
      weights: { fetchedBytes: number; edgeBytes: number; seeded: unknown; peers: Array<{ peerId: string; bytes: number }> }
    }
    expect(j.weights.fetchedBytes).toBe(j.weights.edgeBytes)
    const fromGateway = j.weights.peers.find((p) => p.peerId === line.peerId)
    expect(fromGateway?.bytes ?? 0).toBeGreaterThan(0)
    expect(j.weights.peers.reduce((s, p) => s + p.bytes, 0)).toBe(j.weights.fetchedBytes)
    // --no-seed-weights: this one served nothing
    expect(j.weights.seeded).toBeNull()
    expect(j.text).toBe((await localGreedy(GGUF_PATH, 'Once upon a time', 8)).text)
  })

  it('api with two --model-id: one address lists both models by id, with their readable names', {
    timeout: 180_000
  }, async () => {
    const idB = (seedB as unknown as { contentId: string }).contentId
    const modelsDir = mkdtempSync(join(tmpdir(), 'weights-clients-models-'))
    homes.push(modelsDir)
    const api = await runModelsApi(
      gatewayOptions({ bootstrap: seed.addrs[0], model: '', modelsDir }),
      [contentId, idB],
      runApi,
      createLogger({ level: 'silent' })
    )
    try {
      const models = (await (await fetch(`${api.url}/v1/models`)).json()) as {
        data: Array<{ id: string; layerswarm: { model_id: string; name: string } }>
      }
      expect(models.data.map((m) => m.id)).toEqual([contentId, idB])
      expect(models.data.map((m) => m.layerswarm.model_id)).toEqual([seed.modelId, seedB.modelId])
      expect(models.data[0].layerswarm.name).not.toBe(models.data[1].layerswarm.name)
    } finally {
      await api.close()
    }
  })

  it('join --model-id auto serves model A once clients ask for it: demand outranks the share served', {
    timeout: 180_000
  }, async () => {
    // the gateway's completions asked A's seed for tokens; its next announcement (300 ms) says so
    let ranking = (await chooseModelByDemand([seed.addrs[0], seedB.addrs[0]])).ranking
    for (let i = 0; i < 60 && ranking[0].modelId !== seed.modelId; i++) {
      await new Promise((r) => setTimeout(r, 500))
      ranking = (await chooseModelByDemand([seed.addrs[0], seedB.addrs[0]])).ranking
    }
    expect(ranking[0].modelId).toBe(seed.modelId)
    expect(ranking[0].demandTokensPerMinute).toBeGreaterThan(0)
    const child = spawn(
      process.execPath,
      [CLI, 'join', '--model-id', 'auto', '--bootstrap', `${seed.addrs[0]},${seedB.addrs[0]}`, '--num-blocks', '1'].concat([
        '--ephemeral-identity',
        '--kv-dtype',
        'f32',
        ...ANNOUNCE
      ]),
      { env: home(), stdio: ['ignore', 'pipe', 'pipe'] }
    )
    const stderr: string[] = []
    createInterface({ input: child.stderr! }).on('line', (l) => stderr.push(l))
    const lines: string[] = []
    try {
      const serving = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).on('line', (l) => {
          lines.push(l)
          if (l.includes('"serving"')) resolve(l)
        })
        child.once('exit', (code) => reject(new Error(`join exited ${code}:\n${stderr.join('\n')}`)))
      })
      const choice = JSON.parse(lines[0]) as { event: string; contentId: string }
      expect(choice).toMatchObject({ event: 'model-choice', contentId })
      const e = JSON.parse(serving) as { layers: [number, number]; modelId: string }
      expect(e.modelId).toBe(seed.modelId)
      // A's blocks 1-3 are served: the joiner takes block 0 or 4
      expect([0, 4]).toContain(e.layers[0])
    } finally {
      child.kill('SIGTERM')
      if (child.exitCode === null) await once(child, 'exit')
    }
  })
})
