/**
 * The set-up of the session-key e2e tests: one real node process on SPAN (span-node.ts), a
 * client host, an upstream hop's host whose receipt key the test holds, the node's announced
 * X25519 key, and session callers dialled to the node (aborted on close).
 */
import { generateKeyPair } from '@libp2p/crypto/keys'
import type { PrivateKey } from '@libp2p/interface'
import { expect } from 'vitest'
import {
  createHost,
  createSessionCaller,
  fetchInfo,
  type Host,
  RemoteError,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller,
  type SessionRequestBody
} from '../../protocol/index.js'
import { type SpanNode, startSpanNode } from './span-node.js'

export interface KeyedSpan {
  readonly fx: SpanNode
  readonly client: Host
  readonly upstream: Host
  readonly upstreamKey: PrivateKey
  /** The X25519 key the node announces (its Info). */
  readonly nodePub: Uint8Array
  /** A session stream from `host` to the node. */
  dial(host: Host): Promise<SessionCaller>
  close(): Promise<void>
}

/** A span node whose embeddings of `ids` are the test's inputs (SpanNode.rows). */
export async function startKeyedSpan(ids: number[]): Promise<KeyedSpan> {
  const fx = await startSpanNode({ hosts: 1, ids })
  const [client] = fx.hosts
  const upstreamKey = await generateKeyPair('Ed25519')
  const upstream = await createHost({ listen: [], pubsub: false, privateKey: upstreamKey })
  const { info } = await fetchInfo(client, fx.target())
  const callers: SessionCaller[] = []
  return {
    fx,
    client,
    upstream,
    upstreamKey,
    nodePub: info.x25519PublicKey,
    dial: async (host) => {
      const c = createSessionCaller(await host.dialProtocol(fx.target(), SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
      callers.push(c)
      return c
    },
    close: async () => {
      for (const c of callers) c.abort(new Error('test done'))
      await upstream.stop()
      await fx.close()
    }
  }
}

/** The code of the RemoteError the node refuses `body` with; an accepted request fails the test. */
export async function refusedCode(caller: SessionCaller, body: SessionRequestBody): Promise<string> {
  const err = await caller.call(body).then(
    () => new Error(`${body.type} was accepted`),
    (e: unknown) => e
  )
  expect(err).toBeInstanceOf(RemoteError)
  return (err as RemoteError).code
}
