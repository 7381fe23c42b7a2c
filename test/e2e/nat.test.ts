/**
 * Issue #19, reachability: a node at home behind a NAT (iptables MASQUERADE in a router
 * namespace, test/helpers/netns.ts) serves a client in the public namespace through a relay,
 * then directly after DCUtR hole punching; the tokens equal one process's. Real node and client
 * processes inside the namespaces. Skips, saying why, where namespaces cannot be made (not root,
 * no iptables, not Linux).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLI } from '../helpers/cli.js'
import { CLIENT_IP, HOME_IP, makeNatNamespaces, type NatNamespaces, RELAY_IP } from '../helpers/netns.js'
import { GGUF_PATH, loadReference, ROOT } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FAST = ['--kernels', 'reference', '--announce-interval', '300', '--kv-dtype', 'f32', '--ephemeral-identity']
const nat = makeNatNamespaces()
const skip = typeof nat === 'string' ? nat : undefined
if (skip) process.stderr.write(`nat.test.ts skipped: ${skip}\n`)

interface Started {
  child: ChildProcess
  info: { peerId: string; addrs: string[] }
  logs: string[]
}

function inNs(ns: NatNamespaces, name: string, args: string[]): ChildProcess {
  const [cmd, ...pre] = ns.exec(name)
  return spawn(cmd, [...pre, process.execPath, CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
}

async function startIn(ns: NatNamespaces, name: string, args: string[]): Promise<Started> {
  const child = inNs(ns, name, ['node', 'start', '--model', GGUF_PATH, ...FAST, ...args])
  const logs: string[] = []
  createInterface({ input: child.stderr! }).on('line', (l) => logs.push(l))
  const line = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`node did not start:\n${logs.join('\n')}`)), 60_000)
    createInterface({ input: child.stdout! }).once('line', (l) => {
      clearTimeout(t)
      resolve(l)
    })
    child.once('exit', (code) => reject(new Error(`node exited ${code}:\n${logs.join('\n')}`)))
  })
  return { child, info: JSON.parse(line), logs }
}

async function generateIn(ns: NatNamespaces, name: string, args: string[]) {
  const child = inNs(ns, name, [
    'generate',
    '--model',
    GGUF_PATH,
    '--prompt',
    ref.prompt,
    '--max-tokens',
    '32',
    '--temperature',
    '0',
    '--json',
    ...args
  ])
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  const t = setTimeout(() => child.kill('SIGKILL'), 120_000)
  const status = await new Promise<number | null>((r) => child.once('exit', r))
  clearTimeout(t)
  expect(status, stderr).toBe(0)
  return JSON.parse(stdout) as { tokens: number[]; reachability: Record<string, string> }
}

describe.skipIf(skip !== undefined)('a node behind NAT serves through a relay, then hole-punched', () => {
  const ns = nat as NatNamespaces
  const procs: ChildProcess[] = []
  let relay: Started
  let home: Started

  beforeAll(async () => {
    // the relay: a public node that serves reservations (and a block the client's route skips)
    relay = await startIn(ns, ns.public, [
      '--layers',
      '0:1',
      '--listen',
      `/ip4/${RELAY_IP}/tcp/4101`,
      '--announce',
      `/ip4/${RELAY_IP}/tcp/4101`,
      '--relay'
    ])
    procs.push(relay.child)
    const relayAddr = relay.info.addrs.find((a) => a.includes(RELAY_IP))!
    // at home: reachable only from inside the home network, so it reserves a slot on the relay
    home = await startIn(ns, ns.home, [
      '--layers',
      '1:4',
      '--listen',
      `/ip4/${HOME_IP}/tcp/4102`,
      '--use-relay',
      '--bootstrap',
      relayAddr
    ])
    procs.push(home.child)
  }, 120_000)

  afterAll(() => {
    for (const p of procs) p.kill('SIGKILL')
    ns?.remove?.()
  })

  it('announces a relayed address', () => {
    const relayed = home.info.addrs.filter((a) => a.includes('/p2p-circuit'))
    expect(relayed.length, home.logs.join('\n')).toBeGreaterThan(0)
    expect(relayed[0]).toContain(`/ip4/${RELAY_IP}/`)
    expect(relayed[0]).toContain(`/p2p/${relay.info.peerId}/p2p-circuit/p2p/${home.info.peerId}`)
  })

  it('layerswarm swarm shows the home node as relayed', { timeout: 60_000 }, async () => {
    const relayAddr = relay.info.addrs.find((a) => a.includes(RELAY_IP))!
    const child = inNs(ns, ns.public, ['swarm', '--bootstrap', relayAddr, '--wait', '1000', '--json'])
    let stdout = ''
    child.stdout!.on('data', (d) => (stdout += d))
    expect(await new Promise((r) => child.once('exit', r))).toBe(0)
    const view = JSON.parse(stdout) as { peers: Array<{ peerId: string; reachability: string }> }
    expect(view.peers.find((p) => p.peerId === home.info.peerId)?.reachability).toBe('relayed')
    expect(view.peers.find((p) => p.peerId === relay.info.peerId)?.reachability).toBe('direct')
  })

  it('a client that only dials reaches the home node through the relay', { timeout: 150_000 }, async () => {
    const relayAddr = relay.info.addrs.find((a) => a.includes(RELAY_IP))!
    const out = await generateIn(ns, ns.public, ['--bootstrap', relayAddr])
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 32))
    expect(out.reachability[home.info.peerId]).toBe('relayed')
  })

  it('a client with a public address is dialled back through the NAT (DCUtR): hole-punched', { timeout: 150_000 }, async () => {
    const relayAddr = relay.info.addrs.find((a) => a.includes(RELAY_IP))!
    const out = await generateIn(ns, ns.public, [
      '--bootstrap',
      relayAddr,
      '--listen',
      `/ip4/${CLIENT_IP}/tcp/4103`,
      '--announce',
      `/ip4/${CLIENT_IP}/tcp/4103`
    ])
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 32))
    expect(out.reachability[home.info.peerId]).toBe('hole-punched')
  })
})
