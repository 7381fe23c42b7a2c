/**
 * A NAT made of Linux network namespaces (issue #19's NAT test), joined by veth pairs only to
 * each other, never to the machine's own network, so nothing sent inside can leave it:
 *
 *   public  (RELAY_IP, CLIENT_IP) ── router (ROUTER_PUBLIC_IP │ MASQUERADE │ ROUTER_HOME_IP) ── home (HOME_IP)
 *
 * The home namespace's default route is the router, which rewrites its packets' source to the
 * router's public address (iptables MASQUERADE, a home router's NAT); the public namespace has
 * no route to the home network, so a connection from public to home is impossible without a
 * relay or a hole punch. The public side uses addresses outside libp2p's private ranges because
 * DCUtR only exchanges public addresses (@libp2p/dcutr utils.ts isPublicAndDialable); they are
 * reachable only inside these namespaces.
 */
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'

export const RELAY_IP = '1.2.3.1'
export const CLIENT_IP = '1.2.3.2'
export const ROUTER_PUBLIC_IP = '1.2.3.254'
export const ROUTER_HOME_IP = '192.168.77.1'
export const HOME_IP = '192.168.77.2'

export interface NatNamespaces {
  readonly public: string
  readonly router: string
  readonly home: string
  /** The command prefix that runs a program inside namespace `ns`. */
  exec(ns: string): string[]
  remove(): void
}

function run(args: string[]): void {
  const r = spawnSync(args[0], args.slice(1), { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`)
}

/**
 * Make the three namespaces, or say why not (not root, no `ip`, no iptables, a kernel without
 * namespaces or NAT): the NAT test skips with that message.
 */
export function makeNatNamespaces(): NatNamespaces | string {
  if (process.platform !== 'linux') return 'network namespaces need Linux'
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)'
  const tag = randomBytes(3).toString('hex')
  const ns = { public: `ls-pub-${tag}`, router: `ls-rtr-${tag}`, home: `ls-home-${tag}` }
  const made: string[] = []
  const remove = () => {
    for (const n of made) spawnSync('ip', ['netns', 'del', n])
  }
  const inNs = (n: string, ...args: string[]) => run(['ip', 'netns', 'exec', n, ...args])
  try {
    for (const n of [ns.public, ns.router, ns.home]) {
      run(['ip', 'netns', 'add', n])
      made.push(n)
      inNs(n, 'ip', 'link', 'set', 'lo', 'up')
    }
    // veth pairs: public <-> router, router <-> home (names ≤ 15 bytes)
    run(['ip', 'link', 'add', `lp${tag}`, 'netns', ns.public, 'type', 'veth', 'peer', 'name', `rp${tag}`, 'netns', ns.router])
    run(['ip', 'link', 'add', `lh${tag}`, 'netns', ns.home, 'type', 'veth', 'peer', 'name', `rh${tag}`, 'netns', ns.router])
    inNs(ns.public, 'ip', 'addr', 'add', `${RELAY_IP}/24`, 'dev', `lp${tag}`)
    inNs(ns.public, 'ip', 'addr', 'add', `${CLIENT_IP}/24`, 'dev', `lp${tag}`)
    inNs(ns.public, 'ip', 'link', 'set', `lp${tag}`, 'up')
    inNs(ns.router, 'ip', 'addr', 'add', `${ROUTER_PUBLIC_IP}/24`, 'dev', `rp${tag}`)
    inNs(ns.router, 'ip', 'addr', 'add', `${ROUTER_HOME_IP}/24`, 'dev', `rh${tag}`)
    inNs(ns.router, 'ip', 'link', 'set', `rp${tag}`, 'up')
    inNs(ns.router, 'ip', 'link', 'set', `rh${tag}`, 'up')
    inNs(ns.home, 'ip', 'addr', 'add', `${HOME_IP}/24`, 'dev', `lh${tag}`)
    inNs(ns.home, 'ip', 'link', 'set', `lh${tag}`, 'up')
    inNs(ns.home, 'ip', 'route', 'add', 'default', 'via', ROUTER_HOME_IP)
    inNs(ns.router, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1')
    inNs(ns.router, 'iptables', '-t', 'nat', '-A', 'POSTROUTING', '-o', `rp${tag}`, '-j', 'MASQUERADE')
    // a home router lets in only what answers a connection from inside
    inNs(ns.router, 'iptables', '-A', 'FORWARD', '-i', `rp${tag}`, '-m', 'conntrack', '--ctstate', 'NEW', '-j', 'DROP')
  } catch (err) {
    remove()
    return `cannot make network namespaces with a NAT here: ${(err as Error).message}`
  }
  return { ...ns, exec: (n) => ['ip', 'netns', 'exec', n], remove }
}
