import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type LayerswarmClient } from '../../client/index.js'
import type { RunningApi } from '../../node/cli/commands/api.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { createChatFormatter } from '../../node/gateway/chat-template.js'
import { type Gateway, startGateway } from '../../node/gateway/server.js'
import { createLogger } from '../../node/log.js'
import { createReferenceKernels } from '../../shards/index.js'
import { startGatewayApi } from '../helpers/gateway-api.js'
import { GGUF_PATH } from '../helpers/reference.js'

// Issue #39 item 6: request deadlines and connection caps on the gateway, a cap on /model.gguf
// downloads. A real node process, a real gateway, raw TCP sockets as the hostile clients.

const REQUEST_TIMEOUT_MS = 800
const PER_IP = 4

interface RawClient {
  readonly socket: Socket
  /** Everything the server sent. */
  received(): string
  /** Resolves when the server closed the connection. */
  readonly closed: Promise<void>
}

async function rawConnect(url: string): Promise<RawClient> {
  const { hostname, port } = new URL(url)
  const socket = connect({ host: hostname, port: Number(port) })
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  let got = ''
  socket.on('data', (b: Buffer) => {
    got += b.toString('latin1')
  })
  socket.on('error', () => {}) // a reset is one way a server closes
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  return { socket, received: () => got, closed }
}

describe('gateway limits', () => {
  let node: LocalNode
  let api: RunningApi

  beforeAll(async () => {
    // each step's answer leaves the node 40 ms late: a streamed generation outlasts the request deadline
    node = await startLocalNode({
      model: GGUF_PATH,
      layers: '1:4',
      args: ['--kernels', 'reference', '--announce-interval', '300'],
      env: { ...process.env, LAYERSWARM_LINK_DELAY_MS: '40' }
    })
    api = await startGatewayApi({
      model: GGUF_PATH,
      bootstrap: node.addrs[0],
      requestTimeout: REQUEST_TIMEOUT_MS,
      maxConnectionsPerIp: PER_IP
    })
  }, 60_000)

  afterAll(async () => {
    await api?.close()
    await node?.stop()
  })

  // first: other tests' keep-alive sockets would count against the cap
  it(`closes a client address's connections past ${PER_IP} on arrival, and serves the others`, async () => {
    const held: RawClient[] = []
    try {
      for (let i = 0; i < PER_IP; i++) held.push(await rawConnect(api.gateway.url))
      const extra = await rawConnect(api.gateway.url)
      await extra.closed
      expect(extra.received()).toBe('')
      // the ones within the cap still answer
      held[0].socket.write('GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')
      await held[0].closed
      expect(held[0].received()).toMatch(/^HTTP\/1\.1 200 /)
    } finally {
      for (const h of held) h.socket.destroy()
    }
    // once they closed, a new connection is served again
    const again = await rawConnect(api.gateway.url)
    again.socket.write('GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')
    await again.closed
    expect(again.received()).toMatch(/^HTTP\/1\.1 200 /)
  }, 30_000)

  it('cuts a client that trickles its request body at the deadline, with 408', async () => {
    const c = await rawConnect(api.gateway.url)
    const bodyBytes = 100_000
    c.socket.write(
      'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${bodyBytes}\r\n\r\n{`
    )
    // one byte every 50 ms: the whole body would take more than 80 minutes
    let sent = 1
    const trickle = setInterval(() => {
      if (!c.socket.destroyed && c.socket.writable) {
        c.socket.write(' ')
        sent++
      }
    }, 50)
    try {
      await c.closed
    } finally {
      clearInterval(trickle)
    }
    expect(sent).toBeLessThan(bodyBytes)
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 /)
  }, 30_000)

  it('cuts a client that never finishes its headers', async () => {
    const c = await rawConnect(api.gateway.url)
    c.socket.write('GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n')
    const trickle = setInterval(() => c.socket.writable && c.socket.write('X-Slow: 1\r\n'), 50)
    try {
      await c.closed
    } finally {
      clearInterval(trickle)
    }
    expect(c.received()).not.toContain('"object":"list"')
  }, 30_000)

  it('never cuts a streamed answer that outlasts the request deadline', async () => {
    const res = await fetch(`${api.gateway.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stream: true })
    })
    expect(res.status).toBe(200)
    const text = await res.text()
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '))
    expect(events.at(-1)).toBe('data: [DONE]')
    const last = JSON.parse(events.at(-2)!.slice(6)) as {
      usage: { completion_tokens: number }
      choices: { finish_reason: string }[]
    }
    expect(last.usage.completion_tokens).toBe(40)
    expect(last.choices[0].finish_reason).toBe('length')
  }, 60_000)
})

describe('gateway /model.gguf download cap', () => {
  const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gw-dl-'))
  let node: LocalNode
  let client: LayerswarmClient
  let gateway: Gateway

  beforeAll(async () => {
    node = await startLocalNode({ model: GGUF_PATH, layers: '1:4', args: ['--kernels', 'reference'] })
    client = await createClient({
      bootstrap: [node.addrs[0]],
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      canaries: false
    })
    // a served file larger than every socket buffer on the way: a client that stops reading holds its download
    const big = join(dir, 'big.gguf')
    const fd = openSync(big, 'w')
    ftruncateSync(fd, 256 << 20)
    closeSync(fd)
    gateway = await startGateway({
      client,
      listen: '127.0.0.1:0',
      modelName: 'stories260K',
      chat: createChatFormatter({ bosToken: '<s>', eosToken: '</s>', addsBos: true }),
      contextLength: 512,
      log: createLogger({ level: 'silent' }),
      modelPath: big,
      maxModelDownloads: 1
    })
  }, 60_000)

  afterAll(async () => {
    await gateway?.close()
    await client?.close()
    await node?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('answers 503 with Retry-After past the cap, and serves again once a download ended', async () => {
    const first = await rawConnect(gateway.url)
    first.socket.write('GET /model.gguf HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    // the download started (its headers arrived); then this client stops reading
    while (!first.received().includes('\r\n\r\n')) await new Promise((r) => setTimeout(r, 20))
    expect(first.received()).toMatch(/^HTTP\/1\.1 200 /)
    first.socket.pause()

    const refused = await fetch(`${gateway.url}/model.gguf`, { headers: { range: 'bytes=0-15' } })
    expect(refused.status).toBe(503)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('too_many_downloads')

    first.socket.destroy()
    // the server sees the abort and frees the slot
    let res = await fetch(`${gateway.url}/model.gguf`, { headers: { range: 'bytes=0-15' } })
    for (let i = 0; i < 100 && res.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 50))
      res = await fetch(`${gateway.url}/model.gguf`, { headers: { range: 'bytes=0-15' } })
    }
    expect(res.status).toBe(206)
    expect((await res.arrayBuffer()).byteLength).toBe(16)
  }, 60_000)
})
