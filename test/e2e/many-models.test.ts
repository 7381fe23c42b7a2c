import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runApi } from '../../node/cli/commands/api.js'
import { type RunningModelsApi, runModelsApi } from '../../node/cli/commands/api-models.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createLogger } from '../../node/log.js'
import { computeModelId, openModelFile, parseShape, readableModelName, writeRandomModel } from '../../shards/index.js'
import { CLI } from '../helpers/cli.js'
import { cliAsync } from '../helpers/cli-async.js'
import { gatewayOptions, localGreedy } from '../helpers/gateway-api.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue 33 item 5: two models in one swarm. One `node serve` process serves spans of both (a
// peer per span), a `node start` process serves the rest of the second; `swarm` lists both models
// with readable names; one gateway address serves both by the request's `model`, each
// token-equal to the model run in one process; `/v1/models` lists both; an unknown model is a 404.

const FAST = ['--kernels', 'reference', '--announce-interval', '300', '--kv-dtype', 'f32', '--ephemeral-identity']
const dir = mkdtempSync(join(tmpdir(), 'models-many-'))
const MODEL_B = join(dir, 'tiny-q8.gguf')

interface Served {
  peers: Array<{ peerId: string; addrs: string[]; layers: [number, number]; modelId: string; modelName: string }>
}

async function startServe(args: string[]): Promise<{ child: ChildProcess; served: Served; logs: string[] }> {
  const child = spawn(process.execPath, [CLI, 'node', 'serve', ...args, ...FAST], { stdio: ['ignore', 'pipe', 'pipe'] })
  const logs: string[] = []
  createInterface({ input: child.stderr! }).on('line', (l) => logs.push(l))
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`node serve exited with ${code}:\n${logs.join('\n')}`)
  })
  const [line] = (await Promise.race([once(createInterface({ input: child.stdout! }), 'line'), exited])) as [string]
  return { child, served: JSON.parse(line) as Served, logs }
}

const greedy = localGreedy

describe('two models in one swarm', () => {
  let serve: ChildProcess | undefined
  let served: Served
  const nodes: LocalNode[] = []
  let api: RunningModelsApi
  let client: OpenAI
  const idA = (() => {
    const m = openModelFile(GGUF_PATH)
    const id = computeModelId(m)
    m.close()
    return id
  })()

  beforeAll(async () => {
    writeRandomModel(MODEL_B, parseShape('64,4,4,2,128,300,untied'), { dtype: 'q8_0', seed: 5, seqLen: 128 })
    const s = await startServe([`${GGUF_PATH}:1:4`, `${MODEL_B}:1:2`])
    serve = s.child
    served = s.served
    nodes.push(
      await startLocalNode({ model: MODEL_B, layers: '2:3', bootstrap: [served.peers[0].addrs[0]], args: FAST.slice(0, 4) })
    )
    api = await runModelsApi(
      gatewayOptions({ bootstrap: served.peers[0].addrs[0], model: '' }),
      [GGUF_PATH, MODEL_B],
      runApi,
      createLogger({ level: 'silent' })
    )
    client = new OpenAI({ baseURL: `${api.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 })
  }, 180_000)

  afterAll(async () => {
    await api?.close()
    await Promise.all(nodes.map((n) => n.stop()))
    if (serve && serve.exitCode === null) {
      serve.kill('SIGTERM')
      await once(serve, 'exit')
    }
    rmSync(dir, { recursive: true, force: true })
  })

  it('node serve runs one peer per span, each of its own model, with its readable name', () => {
    expect(served.peers.map((p) => p.layers)).toEqual([
      [1, 4],
      [1, 2]
    ])
    expect(served.peers[0].modelId).toBe(idA)
    expect(served.peers[1].modelId).not.toBe(idA)
    expect(new Set(served.peers.map((p) => p.peerId)).size).toBe(2)
    const b = openModelFile(MODEL_B)
    expect(served.peers[1].modelName).toBe(readableModelName(b))
    expect(served.peers[1].modelName).toMatch(/Q8_0/)
    b.close()
  })

  it('swarm lists both models with their coverage and readable names', { timeout: 60_000 }, async () => {
    const r = await cliAsync(['swarm', '--bootstrap', served.peers[0].addrs[0], '--wait', '1500', '--json'])
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout) as { models: Array<{ modelId: string; name?: string; covered: number[]; gaps: number[] }> }
    const a = out.models.find((m) => m.modelId === idA)
    const b = out.models.find((m) => m.modelId === served.peers[1].modelId)
    expect(a).toMatchObject({ name: served.peers[0].modelName, covered: [1, 2, 3], gaps: [0, 4] })
    expect(b).toMatchObject({ name: served.peers[1].modelName, covered: [1, 2], gaps: [0, 3] })
    const text = await cliAsync(['swarm', '--bootstrap', served.peers[0].addrs[0], '--wait', '1500'])
    expect(text.stdout).toContain(`model ${idA} (5 blocks)  ${served.peers[0].modelName}`)
    expect(text.stdout).toContain(`model ${served.peers[1].modelId} (4 blocks)  ${served.peers[1].modelName}`)
  })

  it('/v1/models lists both; /v1/models/:id finds each; an unknown one is a 404', async () => {
    const list = await client.models.list()
    expect(list.data.map((m) => m.id)).toEqual(['stories260K', 'tiny-q8'])
    const meta = list.data.map((m) => (m as unknown as { layerswarm: { model_id: string; name: string } }).layerswarm)
    expect(meta.map((m) => m.model_id)).toEqual([idA, served.peers[1].modelId])
    expect(meta.map((m) => m.name)).toEqual([served.peers[0].modelName, served.peers[1].modelName])
    expect((await client.models.retrieve('tiny-q8')).id).toBe('tiny-q8')
    const res = await fetch(`${api.url}/v1/models/nope`)
    expect(res.status).toBe(404)
  })

  it('the gateway serves each model by `model`, token-equal to one process', { timeout: 180_000 }, async () => {
    for (const [name, file, prompt] of [
      ['stories260K', GGUF_PATH, 'Once upon a time'],
      ['tiny-q8', MODEL_B, 'hello world']
    ] as const) {
      const local = await greedy(file, prompt, 12)
      const res = await client.completions.create({ model: name, prompt, max_tokens: 12, temperature: 0 })
      expect(res.model).toBe(name)
      expect(res.choices[0].text).toBe(local.completion)
      expect(res.usage?.completion_tokens).toBe(local.tokens.length)
      // streamed, through the same front
      const stream = await client.completions.create({ model: name, prompt, max_tokens: 12, temperature: 0, stream: true })
      let text = ''
      for await (const c of stream) text += c.choices[0]?.text ?? ''
      expect(text).toBe(local.completion)
    }
    // the same request by model id picks the same model
    const byId = await client.completions.create({ model: idA, prompt: 'Once upon a time', max_tokens: 4, temperature: 0 })
    expect(byId.choices[0].text).toBe((await greedy(GGUF_PATH, 'Once upon a time', 4)).completion)
  })

  it('an unknown model gets OpenAI’s 404 model_not_found, naming the models served', async () => {
    const res = await fetch(`${api.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4', prompt: 'x', max_tokens: 1 })
    })
    expect(res.status).toBe(404)
    const body = (await res.json()) as { error: { code: string; param: string; type: string; message: string } }
    expect(body.error).toMatchObject({ code: 'model_not_found', param: 'model', type: 'invalid_request_error' })
    expect(body.error.message).toContain("'stories260K', 'tiny-q8'")
    // a body without a model gets the gateway's own 400, as with one model
    const missing = await fetch(`${api.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'x' })
    })
    expect(missing.status).toBe(400)
  })
})
