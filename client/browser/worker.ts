/**
 * The browser SDK in a Web Worker: the chat page (node/gateway/static/chat.js) posts `init` and
 * `generate` messages, the worker answers with `ready`, `token`, `done` and `error`. A worker,
 * because the WebAssembly kernels compile synchronously (allowed in workers only past 4 KiB)
 * and a forward pass must not freeze the page.
 */
import { checkKnownAnswers, type KnownAnswerVectors, nodePrimitives, webCryptoPrimitives } from '../../crypto/index.js'
import { WorkerNotReadyError } from './errors.js'
import { type BrowserClient, type BrowserClientInit, createBrowserClient } from './index.js'

export type WorkerRequest =
  | { readonly type: 'init'; readonly init: BrowserClientInit }
  | {
      readonly type: 'generate'
      readonly id: number
      readonly prompt: string
      readonly maxTokens: number
      readonly temperature?: number
    }
  /** Known-answer self-test of this browser's crypto: WebCrypto and the bundle's node:crypto shim. */
  | { readonly type: 'kat'; readonly vectors: KnownAnswerVectors }

export type WorkerReply =
  | { type: 'ready'; modelId: string; fetchedBytes: number; totalBytes: number; kernels: string; span: unknown }
  | { type: 'token'; id: number; token: number; text: string }
  | { type: 'rollback'; id: number; position: number; text: string }
  | {
      type: 'done'
      id: number
      tokens: number[]
      promptTokens: number[]
      text: string
      routes: unknown
      receipts: unknown
      canaries: unknown
      wire: unknown
      // with head remote: the head stats (GenerateResult.head), else null
      head: unknown
    }
  | { type: 'error'; id?: number; code: string; message: string }
  | { type: 'kat'; failed: { webcrypto: string[]; shim: string[] } }

interface WorkerScope {
  onmessage: ((e: { data: WorkerRequest }) => void) | null
  postMessage(reply: WorkerReply): void
}

const scope = globalThis as unknown as WorkerScope
let browser: Promise<BrowserClient> | undefined

function errorReply(err: unknown, id?: number): WorkerReply {
  const e = err as { code?: string; message?: string }
  return { type: 'error', id, code: e?.code ?? 'UNKNOWN', message: e?.message ?? String(err) }
}

async function generate(req: Extract<WorkerRequest, { type: 'generate' }>): Promise<void> {
  if (!browser) throw new WorkerNotReadyError('the worker got generate before init')
  const { client } = await browser
  const it = client.stream(req.prompt, { maxTokens: req.maxTokens, temperature: req.temperature ?? 0 })
  let r = await it.next()
  while (!r.done) {
    const ev = r.value
    if (ev.type === 'token') scope.postMessage({ type: 'token', id: req.id, token: ev.token, text: ev.text })
    else scope.postMessage({ type: 'rollback', id: req.id, position: ev.position, text: ev.text })
    r = await it.next()
  }
  const res = r.value
  scope.postMessage({
    type: 'done',
    id: req.id,
    tokens: res.tokens,
    promptTokens: res.promptTokens,
    text: res.text,
    routes: res.report.routes,
    receipts: res.report.receipts,
    canaries: res.report.canaries,
    wire: res.report.wire,
    head: res.head ?? null
  })
}

scope.onmessage = (e) => {
  const msg = e.data
  if (msg.type === 'init') {
    browser = createBrowserClient(msg.init)
    browser.then(
      (b) =>
        scope.postMessage({
          type: 'ready',
          modelId: b.client.modelId,
          fetchedBytes: b.fetchedBytes,
          totalBytes: b.totalBytes,
          kernels: b.kernels,
          span: b.client.span
        }),
      (err) => scope.postMessage(errorReply(err))
    )
  } else if (msg.type === 'kat') {
    Promise.all([checkKnownAnswers(webCryptoPrimitives(), msg.vectors), checkKnownAnswers(nodePrimitives, msg.vectors)]).then(
      ([webcrypto, shim]) => scope.postMessage({ type: 'kat', failed: { webcrypto, shim } }),
      (err) => scope.postMessage(errorReply(err))
    )
  } else if (msg.type === 'generate') {
    generate(msg).catch((err) => scope.postMessage(errorReply(err, msg.id)))
  }
}
