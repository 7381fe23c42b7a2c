// A peer process for issue #39's per-IP test (test/e2e/sybil-limits.test.ts), run inside a
// network namespace: `identities` fresh peer ids each open sessions on the node at `target`
// (never stepping) until refused or `perIdentity` are open; prints one JSON line with what each
// got and the node's info, then, after `infoAgainMs`, the info again; holds its connections
// until killed. Plain JavaScript over dist/, since the namespace runs a bare `node`.
import { multiaddr } from '@multiformats/multiaddr'
import {
  createHost,
  createSessionCaller,
  fetchInfo,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  solveOpenProof
} from '../../dist/protocol/index.js'

const o = JSON.parse(process.argv[2])
const target = multiaddr(o.target)
const nodePeerId = o.target.split('/p2p/').at(-1)
const opened = []
const refused = []
/** The proof-of-work bits each PROOF_REQUIRED open asked for (then solved and retried, as a client does). */
const proofBits = []
const hosts = []
for (let i = 0; i < o.identities; i++) {
  const host = await createHost({ listen: [], pubsub: false })
  hosts.push(host)
  const c = createSessionCaller(await host.dialProtocol(target, SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
  let n = 0
  for (; n < o.perIdentity; n++) {
    const open = { sessionId: `${o.tag}-${i}-${n}`, modelId: o.modelId, start: o.start, end: o.end, maxLength: o.maxLength }
    const call = (proof) =>
      c.call({ type: 'open', open: { ...open, wireDtype: 'f32', nextHops: [], ...proof } }).then(
        (r) => r.type,
        (e) => e.code ?? String(e)
      )
    let got = await call({})
    if (got === 'PROOF_REQUIRED') {
      const bits = (await fetchInfo(host, target)).info.openProofBits ?? 0
      proofBits.push(bits)
      const input = { nodePeerId, clientPeerId: host.peerId.toString(), sessionId: open.sessionId }
      got = await call(solveOpenProof(input, bits))
    }
    if (got !== 'opened') {
      refused.push(got)
      break
    }
  }
  opened.push(n)
}
const info = async () => (await fetchInfo(hosts[0], target)).info
const { activeSessions, freeCacheTokens } = await info()
process.stdout.write(`${JSON.stringify({ opened, refused, proofBits, activeSessions, freeCacheTokens })}\n`)
if (o.infoAgainMs !== undefined) {
  await new Promise((r) => setTimeout(r, o.infoAgainMs))
  const again = await info()
  process.stdout.write(`${JSON.stringify({ activeSessions: again.activeSessions, freeCacheTokens: again.freeCacheTokens })}\n`)
}
setInterval(() => {}, 60_000)
