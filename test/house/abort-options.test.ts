import { describe, expect, test } from 'vitest'
import { auditAbortOptions } from '../helpers/abort-options-audit.js'

// "AbortOptions last on async calls" (the project's style rule, js-libp2p's convention): every
// exported async function and public async method in node/, protocol/, client/, shards/, canary/
// and crypto/ takes `options?: AbortOptions` (or an options object with `signal`) last. What may
// not is named here, with the reason; anything else that appears fails this test.

/** Teardown runs to the end: an aborted close would leak streams, sessions or processes (libp2p's stop() takes none either). */
const TEARDOWN = /#(close|closeAll|stop)$/

const ALLOWED: Record<string, string> = {
  // bounded CPU or WebCrypto work: async only because the platform API is; nothing to stop halfway
  'crypto/async-primitives.ts: AsyncPrimitives#aesGcmOpen': 'one WebCrypto AEAD call',
  'crypto/async-primitives.ts: AsyncPrimitives#aesGcmSeal': 'one WebCrypto AEAD call',
  'crypto/async-primitives.ts: AsyncPrimitives#x25519': 'one WebCrypto key agreement',
  'crypto/keys.ts: bindX25519Key': 'one signature by a caller-given signer',
  'crypto/keys.ts: verifyX25519Binding': 'one signature check',
  'crypto/known-answers.ts: checkKnownAnswers': 'a fixed handful of known-answer checks at start',
  'protocol/receipt.ts: signReceipt': 'one signature',
  'protocol/receipt.ts: verifyReceipt': 'one signature check',
  'protocol/kv-grant.ts: signKvGrant': 'one signature (issue #41)',
  'protocol/receipt.ts: signPayload': 'one signature (issue #41)',
  'protocol/receipt.ts: verifyPayload': 'one signature check (issue #41)',
  'protocol/kv-grant.ts: signKvReceipt': 'one signature (issue #41)',
  'protocol/kv-grant.ts: verifyKvGrant': 'one signature check (issue #41)',
  'protocol/kv-grant.ts: verifyKvReceipt': 'one signature check (issue #41)',
  'node/daemon/kv/kv-grant-check.ts: checkGrant': 'one signature check and field comparisons (issue #41)',
  'client/verification/receipts.ts: ReceiptLedger#check': 'one signature check per hop of a route',
  'client/verification/replay-index.ts: verifyReplayEvidence': 'two signature checks',
  'node/daemon/upstream-step.ts: upstreamClientInputHash': 'one hash',
  'node/daemon/metrics.ts: Metrics#text': 'renders in-memory counters',
  'shards/kernels/wasm/pool.ts: ThreadPool#ready': 'worker start-up, bounded and shared by every caller',
  'shards/kernels/wasm/wasm-kernels.ts: FastKernels#ready': 'worker start-up, bounded and shared by every caller',
  // the signal travels another way
  'client/speculation/speculation.ts: decodeTokens': 'the signal is init.signal (GenerateInit), as for generateTokens',
  'client/head/remote-head-generate.ts: remoteHeadTokens': 'the signal is init.signal (GenerateInit), as for decodeTokens',
  'client/routing/for-each-limited.ts: forEachLimited': "runs the caller's callbacks, which carry the refresh signal",
  'client/head/remote-head-per-token.ts: perTokenRemote': 'the signal is init.signal (GenerateInit), as for remoteHeadTokens',
  'client/session/verified-stream.ts: verifiedTokens': 'pulls from init.tokens, a stream that carries the generation signal',
  'node/gateway/generation.ts: runGeneration': 'the request carries its signal (GenerationRequest.signal, the HTTP request)',
  'client/session/step-transport.ts: StepTransport#run':
    'takes a deadline factory: one signal per hop (relayed) or per step (chained)',
  'client/session/step-transport.ts: tagged': 'wraps a promise the caller made (with its signal), does no work of its own',
  'client/verification/canary-decoy-pool.ts: DecoyPool#decoyFor': 'the open callback carries the caller signal',
  'client/verification/canary-decoy-pool.ts: DecoyPool#stepDecoy': 'the run callback carries the caller signal',
  'client/verification/canary-probes.ts: probeHop': 'the signal is ctx.signal (StepContext), the real step it rides on',
  'client/verification/canary-probes.ts: probeChain': 'the signal is ctx.signal (StepContext), the real step it rides on',
  'client/speculation/draft-model.ts: ModelDrafter#draft':
    'k local forwards of a small model between two steps, whose signal is checked',
  'client/speculation/draft-ngram.ts: Drafter#draft': 'a lookup in the context; the interface ModelDrafter implements',
  'client/verification/relay-decoy.ts: probeRelayRoute': 'the signal is ctx.signal (StepContext), the real step it rides on',
  'client/verification/canary-schedule.ts: DecoySchedule#beforeStep':
    'a few event-loop turns (MAX_OFFSET_TURNS) when decoy steps lead',
  'client/verification/canary-monitor.ts: CanaryMonitor#beforeStep':
    'DecoySchedule#beforeStep: a few event-loop turns when decoy steps lead',
  'client/verification/canary-observer.ts: CanaryObserver#beforeStep':
    'DecoySchedule#beforeStep: a few event-loop turns when decoy steps lead',
  'client/verification/decoy-launcher.ts: DecoyLauncher#beforeStep':
    'DecoySchedule#beforeStep: a few event-loop turns when decoy steps lead',
  'client/verification/decoy-launcher.ts: DecoyLauncher#drain':
    "releases the scheduled decoy steps, then runs the caller's wait, whose audits carry their own deadlines (part of settle)",
  'client/verification/own-step-replay.ts: OwnStepChecks#check':
    "the client's own kernels over a session's rows in slices, no I/O (part of settle, as the canary steps' scoring)",
  'client/session/verified-clear.ts: clearPeers':
    'the signal travels in the StepContext (ctx.signal); the last options only say whether to wait for the canary set',
  'client/verification/canary-schedule.ts: DecoySchedule#drain': "runs the caller's callback, which carries the caller's signal",
  'client/verification/decoy-slots.ts: DecoyPacer#beforeStep':
    'a real step waits for the decoy slots before it, each an interval of the client (issue #39); its step carries the signal',
  'client/verification/decoy-slots.ts: DecoyPacer#drain': "runs the caller's callback, which carries the caller's signal",
  'client/verification/decoy-slots.ts: DecoyPacer#gate':
    'opens at a slot before the next real step or a drain; its probe carries ctx.signal',
  'client/verification/decoy-slots.ts: DecoySlots#beforeStep':
    'a real step waits for the decoy slots before it, each an interval of the client (issue #39); its step carries the signal',
  'client/verification/decoy-slots.ts: DecoySlots#drain': "runs the caller's callback, which carries the caller's signal",
  'client/verification/decoy-slots.ts: DecoySlots#gate':
    'opens at a slot before the next real step or a drain; its probe carries ctx.signal',
  'client/verification/decoy-slots.ts: SlotClock#sleep': 'a slot waits out an interval of at most MAX_INTERVAL_MS',
  'client/verification/canary-schedule.ts: DecoySchedule#gate':
    'opens at the next real step or a drain; its probe carries ctx.signal',
  'protocol/announce.ts: AnnouncerInit#content': 'a callback the node provides (reads its own state)',
  // settling waits for off-path audits that each carry their own deadline (AuditBatcher timeoutMs);
  // a caller's abort must not cancel an audit round other steps share
  'client/verification/audit-batch.ts: AuditBatcher#audit': 'joins a shared round with its own deadline',
  'client/verification/audit-batch.ts: AuditBatcher#drain':
    'runs the caller work (which has its signal) with rounds going out at once',
  'client/verification/canary-monitor.ts: CanaryMonitor#probe': 'the signal travels in the StepContext (ctx.signal)',
  'client/verification/canary-monitor.ts: CanaryMonitor#probeChained': 'the signal travels in the StepContext (ctx.signal)',
  'client/verification/canary-monitor.ts: CanaryMonitor#settle': 'waits for audits with their own deadlines, part of closing',
  'client/verification/canary-observer.ts: CanaryObserver#settle': 'waits for audits with their own deadlines, part of closing',
  'client/verification/canary-observer.ts: CanaryObserver#chainedStepChecked': 'checks receipts off the critical path',
  'client/session/step-transport.ts: StepTransport#pending': 'off-path checks with their own deadlines, part of closing',
  'node/cli/cli-exit.ts: exitWhenDrained': 'the CLI exit: waits for stdout and stderr, then exits'
}

describe('AbortOptions last on every exported async call', () => {
  const findings = auditAbortOptions()

  test('every exported async function and method takes AbortOptions last, or is allowed with a reason', () => {
    const offending = findings.filter((f) => !TEARDOWN.test(f.id) && ALLOWED[f.id] === undefined)
    expect(offending.map((f) => `${f.id} (${f.reason})`)).toEqual([])
  })

  test('the allow-list names only calls that still need it', () => {
    const found = new Set(findings.map((f) => f.id))
    expect(Object.keys(ALLOWED).filter((id) => !found.has(id))).toEqual([])
  })

  test('the audit sees the calls it is about', () => {
    // a broken audit (no program, no exports) would pass the tests above without looking
    expect(findings.some((f) => f.id === 'crypto/keys.ts: bindX25519Key')).toBe(true)
    expect(findings.some((f) => f.id === 'node/daemon/server.ts: SwarmNode#stop')).toBe(true)
  })
}, 120_000)
