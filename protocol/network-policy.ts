/**
 * Who may connect to this process's hosts (issue #38): the swarm key every connection must hold,
 * and optional allow-lists of peer ids for who may serve and who may use the swarm.
 *
 * One policy per process, set by the CLI from `--swarm-key`, `--allow-serve`, `--allow-use`
 * (node/cli/commands/private-swarm.ts) before any host starts, so every host a command makes (the
 * node's, the client's, doctor's probes) follows it without threading it through each caller.
 * HostInit.policy overrides it for one host (tests, the scale bench).
 */
import { PeerNotAllowedError, type SwarmKeyMismatchError } from './errors.js'
import type { SwarmKey } from './swarm-key.js'

export interface NetworkPolicy {
  readonly swarmKey?: SwarmKey
  /** Peer ids that may serve blocks: announcements and routes of others are ignored. */
  readonly allowServe?: ReadonlySet<string>
  /** Peer ids that may use the swarm (open sessions). With either list set, a host connects only to peers on one of them. */
  readonly allowUse?: ReadonlySet<string>
  /** Told of each refused inbound connection (the CLI prints one coded line). */
  readonly onRefused?: (err: SwarmKeyMismatchError | PeerNotAllowedError) => void
}

let current: NetworkPolicy = {}

export function setNetworkPolicy(policy: NetworkPolicy): void {
  current = policy
}

export function networkPolicy(): NetworkPolicy {
  return current
}

/** True when `peerId` may hold a connection under `policy` (no list: anyone with the key). */
export function connectionAllowed(policy: NetworkPolicy, peerId: string): boolean {
  if (!policy.allowServe && !policy.allowUse) return true
  return (policy.allowServe?.has(peerId) ?? false) || (policy.allowUse?.has(peerId) ?? false)
}

/** True when `peerId` may serve blocks under `policy`. */
export function servingAllowed(policy: NetworkPolicy, peerId: string): boolean {
  return policy.allowServe === undefined || policy.allowServe.has(peerId)
}

/**
 * libp2p connection-gater hooks for the allow-lists: encrypted connections (the peer id is
 * proven by Noise by then) from or to a peer on neither list are closed, with one
 * PeerNotAllowedError to `onRefused` for inbound ones.
 */
export function allowListGater(policy: NetworkPolicy): {
  denyInboundEncryptedConnection?: (peer: { toString(): string }) => boolean
  denyOutboundEncryptedConnection?: (peer: { toString(): string }) => boolean
} {
  if (!policy.allowServe && !policy.allowUse) return {}
  return {
    denyInboundEncryptedConnection: (peer) => {
      if (connectionAllowed(policy, peer.toString())) return false
      policy.onRefused?.(new PeerNotAllowedError(`refused a connection from ${peer}: not on --allow-serve or --allow-use`))
      return true
    },
    denyOutboundEncryptedConnection: (peer) => !connectionAllowed(policy, peer.toString())
  }
}

/** Peer ids from an allow-list file's text: one per line, `#` comments, blank lines ignored. */
export function parseAllowList(text: string): Set<string> {
  return new Set(
    text
      .split(/\r?\n/)
      .map((l) => l.replace(/#.*/, '').trim())
      .filter(Boolean)
  )
}
