/**
 * Three Linux network namespaces for issue #39's per-IP limits: a server namespace joined by one
 * veth pair each to an attacker namespace and an honest namespace, on two /24s of their own, so
 * the node sees the attackers and the honest client at different addresses (on loopback every
 * peer is 127.0.0.1, which the node does not count per IP). Nothing is joined to the machine's
 * own network, so nothing sent inside can leave it.
 *
 *   attacker (ATTACKER_IP) ── (SERVER_ATTACKER_SIDE_IP) server (SERVER_HONEST_SIDE_IP) ── honest (HONEST_IP)
 */
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'

export const ATTACKER_IP = '10.77.1.2'
export const SERVER_ATTACKER_SIDE_IP = '10.77.1.1'
export const HONEST_IP = '10.77.2.2'
export const SERVER_HONEST_SIDE_IP = '10.77.2.1'

export interface StarNamespaces {
  readonly server: string
  readonly attacker: string
  readonly honest: string
  /** The command prefix that runs a program inside namespace `ns`. */
  exec(ns: string): string[]
  remove(): void
}

function run(args: string[]): void {
  const r = spawnSync(args[0], args.slice(1), { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`)
}

/** Make the namespaces, or say why not (not root, no `ip`, not Linux): the test skips with that message. */
export function makeStarNamespaces(): StarNamespaces | string {
  if (process.platform !== 'linux') return 'network namespaces need Linux'
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)'
  const tag = randomBytes(3).toString('hex')
  const ns = { server: `ls-srv-${tag}`, attacker: `ls-atk-${tag}`, honest: `ls-hon-${tag}` }
  const made: string[] = []
  const remove = () => {
    for (const n of made) spawnSync('ip', ['netns', 'del', n])
  }
  const inNs = (n: string, ...args: string[]) => run(['ip', 'netns', 'exec', n, ...args])
  try {
    for (const n of [ns.server, ns.attacker, ns.honest]) {
      run(['ip', 'netns', 'add', n])
      made.push(n)
      inNs(n, 'ip', 'link', 'set', 'lo', 'up')
    }
    const links: Array<[string, string, string, string]> = [
      [ns.attacker, `la${tag}`, ATTACKER_IP, SERVER_ATTACKER_SIDE_IP],
      [ns.honest, `lh${tag}`, HONEST_IP, SERVER_HONEST_SIDE_IP]
    ]
    for (const [peer, dev, peerIp, serverIp] of links) {
      run(['ip', 'link', 'add', dev, 'netns', peer, 'type', 'veth', 'peer', 'name', `s${dev}`, 'netns', ns.server])
      inNs(peer, 'ip', 'addr', 'add', `${peerIp}/24`, 'dev', dev)
      inNs(peer, 'ip', 'link', 'set', dev, 'up')
      inNs(ns.server, 'ip', 'addr', 'add', `${serverIp}/24`, 'dev', `s${dev}`)
      inNs(ns.server, 'ip', 'link', 'set', `s${dev}`, 'up')
    }
  } catch (err) {
    remove()
    return `cannot make network namespaces here: ${(err as Error).message}`
  }
  return { ...ns, exec: (n) => ['ip', 'netns', 'exec', n], remove }
}
