/**
 * Two private networks made of Linux network namespaces (issue #31 item 2, issue #39 item 5),
 * joined by veth pairs only to each other, never to the machine's own network:
 *
 *   n1 (N1_IP, 10.77.1.0/24) ── n2 (N2_TEN_IP │ N2_LAN_IP) ── n3 (N3_IP, 192.168.79.0/24; OTHER_IP)
 *
 * n2 is on both networks and routes between them (the client runs there). n3 also holds OTHER_IP (on its loopback interface),
 * in 192.168.80.0/24, a network n2 reaches by a route through n3 but has no interface on: an
 * address a client in n2 can connect to, yet is not "on" (the dial policy's test).
 */
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'

export const N1_IP = '10.77.1.1'
export const N2_TEN_IP = '10.77.1.2'
export const N2_LAN_IP = '192.168.79.2'
export const N3_IP = '192.168.79.3'
export const OTHER_IP = '192.168.80.3'

export interface LanNamespaces {
  readonly n1: string
  readonly n2: string
  readonly n3: string
  /** The command prefix that runs a program inside namespace `ns`. */
  exec(ns: string): string[]
  remove(): void
}

function run(args: string[]): void {
  const r = spawnSync(args[0], args.slice(1), { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`)
}

/** Make the three namespaces, or say why not (not Linux, not root, no `ip`): the test skips with that. */
export function makeLanNamespaces(): LanNamespaces | string {
  if (process.platform !== 'linux') return 'network namespaces need Linux'
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)'
  if (spawnSync('ip', ['-V']).status !== 0) return 'no `ip` command (iproute2)'
  const tag = randomBytes(3).toString('hex')
  const ns = { n1: `ls-n1-${tag}`, n2: `ls-n2-${tag}`, n3: `ls-n3-${tag}` }
  const made: string[] = []
  const remove = () => {
    for (const n of made) spawnSync('ip', ['netns', 'del', n])
  }
  const inNs = (n: string, ...args: string[]) => run(['ip', 'netns', 'exec', n, ...args])
  try {
    for (const n of [ns.n1, ns.n2, ns.n3]) {
      run(['ip', 'netns', 'add', n])
      made.push(n)
      inNs(n, 'ip', 'link', 'set', 'lo', 'up')
    }
    // veth names ≤ 15 bytes
    run(['ip', 'link', 'add', `a1${tag}`, 'netns', ns.n1, 'type', 'veth', 'peer', 'name', `a2${tag}`, 'netns', ns.n2])
    run(['ip', 'link', 'add', `b2${tag}`, 'netns', ns.n2, 'type', 'veth', 'peer', 'name', `b3${tag}`, 'netns', ns.n3])
    inNs(ns.n1, 'ip', 'addr', 'add', `${N1_IP}/24`, 'dev', `a1${tag}`)
    inNs(ns.n2, 'ip', 'addr', 'add', `${N2_TEN_IP}/24`, 'dev', `a2${tag}`)
    inNs(ns.n2, 'ip', 'addr', 'add', `${N2_LAN_IP}/24`, 'dev', `b2${tag}`)
    inNs(ns.n3, 'ip', 'addr', 'add', `${N3_IP}/24`, 'dev', `b3${tag}`)
    inNs(ns.n3, 'ip', 'addr', 'add', `${OTHER_IP}/32`, 'dev', 'lo')
    for (const [n, dev] of [
      [ns.n1, `a1${tag}`],
      [ns.n2, `a2${tag}`],
      [ns.n2, `b2${tag}`],
      [ns.n3, `b3${tag}`]
    ])
      inNs(n, 'ip', 'link', 'set', dev, 'up')
    inNs(ns.n2, 'ip', 'route', 'add', '192.168.80.0/24', 'via', N3_IP)
    // n2 routes between the two networks, so n1 and n3 can dial each other (a chained hop)
    inNs(ns.n2, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1')
    inNs(ns.n1, 'ip', 'route', 'add', '192.168.79.0/24', 'via', N2_TEN_IP)
    inNs(ns.n3, 'ip', 'route', 'add', '10.77.1.0/24', 'via', N2_LAN_IP)
  } catch (err) {
    remove()
    return `cannot make network namespaces here: ${(err as Error).message}`
  }
  return { ...ns, exec: (n) => ['ip', 'netns', 'exec', n], remove }
}
