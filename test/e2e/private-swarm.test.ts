/**
 * A swarm on private networks, in Linux network namespaces (test/helpers/netns-lan.ts): node n1
 * on 10.77.1.0/24, n3 on 192.168.79.0/24, n2 on both (and routing between them), the client in n2.
 *
 * - Issue #31 item 2: `--forwarding chain` works with no extra flag, the chain n1 → n3 → n2
 *   crossing both networks; n1 dials n3 at the address n3's signed announcement gives.
 * - Issue #39 item 5: 80 fake announcements (fresh keys, signed) whose addresses point at decoy
 *   listeners outside the client's dial policy (a private network the client is not on, the
 *   client's own loopback, a fifth address of one peer) cause no connection to any decoy,
 *   while the honest nodes stay visible. Each decoy first takes one probe connection from the
 *   client's namespace, so it is reachable: a dial would have been counted.
 *
 * Skips, saying why, where namespaces cannot be made (not root, no `ip`, not Linux).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_DIALLED_ADDRS_PER_PEER } from '../../client/routing/dial-policy.js'
import { CLI } from '../helpers/cli.js'
import { type LanNamespaces, makeLanNamespaces, N1_IP, N2_LAN_IP, N2_TEN_IP, N3_IP, OTHER_IP } from '../helpers/netns-lan.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300', '--kv-dtype', 'f32', '--ephemeral-identity']
const lan = makeLanNamespaces()
const skip = typeof lan === 'string' ? lan : undefined
if (skip) process.stderr.write(`private-swarm.test.ts skipped: ${skip}\n`)

/** A TCP listener that prints one line per connection it accepts. */
const DECOY_JS =
  "const s=require('node:net').createServer((c)=>{process.stdout.write('conn\\n');c.destroy()});" +
  "s.listen(Number(process.env.PORT),process.env.HOST,()=>process.stdout.write('listening\\n'))"

/** One TCP connection to HOST:PORT, then exit (the probe that shows a decoy is reachable). */
const PROBE_JS =
  "const c=require('node:net').connect(Number(process.env.PORT),process.env.HOST);" +
  "c.on('connect',()=>{c.destroy();process.exit(0)});c.on('error',(e)=>{console.error(e.message);process.exit(1)})"

/** Serves signed announcements of fresh keys (SPECS: [{count, addrs}]) over the announcements protocol. */
const ANNOUNCER_JS = `
import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
const P = await import(process.env.PROTOCOL_URL)
const host = await P.createHost({ listen: [process.env.LISTEN], pubsub: false })
const store = new P.AnnouncementStore()
const now = Date.now()
for (const spec of JSON.parse(process.env.SPECS)) {
  for (let i = 0; i < spec.count; i++) {
    const key = await generateKeyPair('Ed25519')
    const a = { peerId: peerIdFromPrivateKey(key).toString(), modelId: process.env.MODEL_ID, start: 1, end: 2,
      throughput: 10, freeCacheTokens: 512, wireDtypes: ['f32'], version: '1.0.0', addrs: spec.addrs,
      issuedAtMs: now, expiresAtMs: now + 600000 }
    store.put(a, await P.signAnnouncement(a, key))
  }
}
await P.serveAnnouncements(host, store)
process.stdout.write(JSON.stringify({ peerId: host.peerId.toString(), addrs: host.getMultiaddrs().map(String), held: store.size }) + '\\n')
`

interface Started {
  child: ChildProcess
  info: { peerId: string; addrs: string[]; modelId: string }
  logs: string[]
}

function inNs(ns: LanNamespaces, name: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const [cmd, ...pre] = ns.exec(name)
  return spawn(cmd, [...pre, process.execPath, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env })
}

/** Spawn in a namespace and wait for its first stdout line. */
async function firstLine(child: ChildProcess, what: string): Promise<{ line: string; logs: string[] }> {
  const logs: string[] = []
  createInterface({ input: child.stderr! }).on('line', (l) => logs.push(l))
  const line = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not start:\n${logs.join('\n')}`)), 60_000)
    createInterface({ input: child.stdout! }).once('line', (l) => {
      clearTimeout(t)
      resolve(l)
    })
    child.once('exit', (code) => reject(new Error(`${what} exited ${code}:\n${logs.join('\n')}`)))
  })
  return { line, logs }
}

async function startNode(ns: LanNamespaces, name: string, args: string[]): Promise<Started> {
  const child = inNs(ns, name, [CLI, 'node', 'start', '--model', GGUF_PATH, ...FAST, ...args])
  const { line, logs } = await firstLine(child, `node in ${name}`)
  return { child, info: JSON.parse(line), logs }
}

async function cliIn(
  ns: LanNamespaces,
  name: string,
  args: string[]
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = inNs(ns, name, [CLI, ...args])
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  const t = setTimeout(() => child.kill('SIGKILL'), 120_000)
  const status = await new Promise<number | null>((r) => child.once('exit', r))
  clearTimeout(t)
  return { status, stdout, stderr }
}

describe.skipIf(skip !== undefined)('a swarm on 10.x and 192.168.x networks', () => {
  const ns = lan as LanNamespaces
  const procs: ChildProcess[] = []
  let n1: Started
  let n2: Started
  let n3: Started

  beforeAll(async () => {
    n2 = await startNode(ns, ns.n2, ['--layers', '3:4', '--listen', `/ip4/${N2_TEN_IP}/tcp/4202`, `/ip4/${N2_LAN_IP}/tcp/4202`])
    procs.push(n2.child)
    const via = (ip: string) => n2.info.addrs.find((a) => a.includes(`/${ip}/`))!
    n1 = await startNode(ns, ns.n1, ['--layers', '1:2', '--listen', `/ip4/${N1_IP}/tcp/4201`, '--bootstrap', via(N2_TEN_IP)])
    procs.push(n1.child)
    n3 = await startNode(ns, ns.n3, ['--layers', '2:3', '--listen', `/ip4/${N3_IP}/tcp/4203`, '--bootstrap', via(N2_LAN_IP)])
    procs.push(n3.child)
  }, 180_000)

  afterAll(() => {
    for (const p of procs) p.kill('SIGKILL')
    ns?.remove?.()
  })

  it('generate --forwarding chain across both networks, no extra flag: the reference tokens', { timeout: 150_000 }, async () => {
    const bootstrap = n2.info.addrs.find((a) => a.includes(`/${N2_TEN_IP}/`))!
    const r = await cliIn(ns, ns.n2, [
      'generate',
      '--model',
      GGUF_PATH,
      '--bootstrap',
      bootstrap,
      '--prompt',
      ref.prompt,
      '--max-tokens',
      '32',
      '--temperature',
      '0',
      '--json',
      '--forwarding',
      'chain'
    ])
    expect(r.status, `${r.stderr}\n${n1.logs.join('\n')}`).toBe(0)
    const out = JSON.parse(r.stdout) as { tokens: number[]; report: { routes: Array<Array<{ peerId: string }>> } }
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 32))
    // n1 → n3 → n2: the hop from 10.77.1.0/24 to 192.168.79.0/24 is n1 dialling n3's announced address
    expect(out.report.routes[0].map((h) => h.peerId)).toEqual([n1.info.peerId, n3.info.peerId, n2.info.peerId])
  })

  it('80 decoy-address announcements cause no dial outside the client dial policy', { timeout: 150_000 }, async () => {
    const decoys = [
      { ns: ns.n3, host: OTHER_IP, port: 4311, why: 'a private network the client is not on' },
      { ns: ns.n2, host: '127.0.0.1', port: 4312, why: "the client's own loopback (it reaches the swarm over 10.x)" },
      { ns: ns.n1, host: N1_IP, port: 4313, why: `a peer's address number ${MAX_DIALLED_ADDRS_PER_PEER + 1}` }
    ]
    const counts = decoys.map(() => 0)
    for (const [i, d] of decoys.entries()) {
      const child = inNs(ns, d.ns, ['-e', DECOY_JS], { ...process.env, HOST: d.host, PORT: String(d.port) })
      procs.push(child)
      const lines = createInterface({ input: child.stdout! })
      await new Promise<void>((r) => lines.once('line', () => r()))
      lines.on('line', (l) => {
        if (l === 'conn') counts[i]++
      })
    }
    // each decoy is reachable from the client's namespace: one probe connection each
    for (const d of decoys) {
      const probe = inNs(ns, ns.n2, ['-e', PROBE_JS], { ...process.env, HOST: d.host, PORT: String(d.port) })
      expect(await new Promise((r) => probe.once('exit', r))).toBe(0)
    }
    await new Promise((r) => setTimeout(r, 300))
    expect(counts).toEqual([1, 1, 1])

    const closed = Array.from({ length: MAX_DIALLED_ADDRS_PER_PEER }, (_, i) => `/ip4/${N1_IP}/tcp/${4320 + i}`)
    const specs = [
      { count: 30, addrs: [`/ip4/${OTHER_IP}/tcp/4311`] },
      { count: 25, addrs: ['/ip4/127.0.0.1/tcp/4312'] },
      { count: 25, addrs: [...closed, `/ip4/${N1_IP}/tcp/4313`] }
    ]
    const announcer = inNs(ns, ns.n1, ['--input-type=module', '-e', ANNOUNCER_JS], {
      ...process.env,
      PROTOCOL_URL: new URL('../../dist/protocol/index.js', import.meta.url).href,
      LISTEN: `/ip4/${N1_IP}/tcp/4299`,
      MODEL_ID: n2.info.modelId,
      SPECS: JSON.stringify(specs)
    })
    procs.push(announcer)
    const fake = JSON.parse((await firstLine(announcer, 'announcer')).line) as { peerId: string; addrs: string[]; held: number }
    expect(fake.held).toBe(80)

    const bootstrap = [n2.info.addrs.find((a) => a.includes(`/${N2_TEN_IP}/`))!, fake.addrs[0]].join(',')
    const r = await cliIn(ns, ns.n2, ['swarm', '--model', GGUF_PATH, '--bootstrap', bootstrap, '--wait', '2000', '--json'])
    expect(r.status, r.stderr).toBe(0)
    const view = JSON.parse(r.stdout) as { peers: Array<{ peerId: string }> }
    // the honest nodes are all seen
    const seen = view.peers.map((p) => p.peerId)
    for (const n of [n1, n2, n3]) expect(seen).toContain(n.info.peerId)
    await new Promise((r) => setTimeout(r, 1000))
    // still only the probes: no dial reached a decoy
    expect(counts, decoys.map((d) => d.why).join('; ')).toEqual([1, 1, 1])
  })
})
