/**
 * Checks of bootstrap addresses: their form before any dial, and what a failed dial means.
 * A bad address used to end, seconds later, in "nobody serves block(s) …" (NO_ROUTE),
 * which sends a user looking at the swarm instead of at the address they typed.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { errorCode } from '../../shards/index.js'
import {
  BadBootstrapAddressError,
  type BootstrapError,
  BootstrapPeerIdMismatchError,
  BootstrapSwarmKeyError,
  BootstrapUnreachableError,
  DuplicatePeerIdError
} from '../errors.js'

const HOST_PORT = /^(?:[a-z]+:\/\/)?(\[[0-9a-f:]+\]|[^/:\s]+):(\d{1,5})\/?$/i

/** The multiaddr a user most likely meant by `host:port` (the peer id is theirs to add). */
export function suggestMultiaddr(host: string, port: string): string {
  const bare = host.replace(/^\[|\]$/g, '')
  const proto = bare.includes(':') ? 'ip6' : /^\d+(\.\d+){3}$/.test(bare) ? 'ip4' : 'dns'
  return `/${proto}/${bare}/tcp/${port}/p2p/<peer id>`
}

/**
 * Split a comma-separated list and check each entry is a multiaddr; throws
 * BadBootstrapAddressError naming the first bad one (with the multiaddr form of host:port).
 */
export function parseBootstrapList(text: string | readonly string[]): string[] {
  const list = (typeof text === 'string' ? text.split(',') : [...text]).map((x) => x.trim()).filter(Boolean)
  for (const addr of list) checkBootstrapAddress(addr)
  return list
}

export function checkBootstrapAddress(addr: string): void {
  if (typeof addr !== 'string' || addr.length === 0) throw new BadBootstrapAddressError('empty bootstrap address', String(addr))
  const hp = HOST_PORT.exec(addr)
  if (hp) {
    throw new BadBootstrapAddressError(
      `bootstrap address ${addr} is host:port; use the multiaddr a node prints, e.g. ${suggestMultiaddr(hp[1], hp[2])}`,
      addr
    )
  }
  try {
    const ma = multiaddr(addr)
    if (!ma.getComponents().some((c) => c.name === 'tcp'))
      throw new BadBootstrapAddressError('layerswarm peers listen on TCP: expected …/tcp/<port>/p2p/<peer id>', addr)
  } catch (err) {
    throw new BadBootstrapAddressError(
      `bootstrap address ${JSON.stringify(addr)} is not a multiaddr (${firstLine(err)}); expected e.g. /ip4/127.0.0.1/tcp/4001/p2p/<peer id>`,
      addr,
      { cause: err }
    )
  }
}

/** What a failed dial of a bootstrap address means, as a typed error with a one-line message. */
export function bootstrapDialError(addr: string, err: Error): BootstrapError {
  const text = `${err.name} ${err.message} ${errorCode(err) ?? ''} ${causes(err)}`
  // libp2p refuses to dial its own peer id: the address is this process's own id, so another
  // process answers on the same key (issue #31); a restart with a new key would be a mismatch
  if (/dial self/i.test(text)) {
    return new DuplicatePeerIdError(
      `bootstrap peer ${addr} has this process's own peer id: two processes run on one key file and the swarm sees them as one peer; give each node its own --identity FILE (or --ephemeral-identity)`,
      addr,
      { cause: err }
    )
  }
  if (/UnexpectedPeer|unexpected peer|does not match|peer id mismatch|InvalidPeerId|remote peer/i.test(text)) {
    return new BootstrapPeerIdMismatchError(
      `bootstrap peer ${addr}: something answers there but with another peer id (the node restarted with a new identity?); copy its current address`,
      addr,
      { cause: err }
    )
  }
  // issue #38: a private swarm's check (we hold another key), or pnet's bytes where the remote
  // expected multistream-select (we hold none). After the peer-id checks: a wrong peer id fails
  // inside encryption too.
  if (/SWARM_KEY_MISMATCH|EncryptionFailedError/.test(text)) {
    return new BootstrapSwarmKeyError(
      /SWARM_KEY_MISMATCH/.test(text)
        ? `bootstrap peer ${addr} refused the connection: it holds another swarm key (check --swarm-key)`
        : `bootstrap peer ${addr} refused the connection during the handshake: the swarm is private, pass its key with --swarm-key FILE (or join with --invite)`,
      addr,
      { cause: err }
    )
  }
  const why = /ECONNREFUSED|refused/i.test(text)
    ? 'connection refused (nothing listens there)'
    : /timed? ?out|Timeout|aborted/i.test(text)
      ? 'no answer (timed out)'
      : /EHOSTUNREACH|ENETUNREACH|unreachable/i.test(text)
        ? 'host unreachable'
        : /ENOTFOUND|EAI_AGAIN/i.test(text)
          ? 'unknown host name'
          : firstLine(err)
  return new BootstrapUnreachableError(`cannot reach bootstrap peer ${addr}: ${why}`, addr, { cause: err })
}

function firstLine(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err)
  return m.split('\n')[0].slice(0, 200)
}

function causes(err: Error): string {
  const out: string[] = []
  let e: unknown = (err as { cause?: unknown }).cause
  for (let i = 0; i < 4 && e instanceof Error; i++, e = (e as { cause?: unknown }).cause)
    out.push(`${e.name} ${e.message} ${errorCode(e) ?? ''}`)
  if (err instanceof AggregateError) for (const x of err.errors) if (x instanceof Error) out.push(`${x.name} ${x.message}`)
  return out.join(' ')
}
