import { existsSync, renameSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ClientInit, createClient, type LayerswarmClient } from '../client/index.js'
import type { LocalNode } from '../node/cli/local-swarm.js'
import { createTokenizer, type KernelKind, type ModelFile, parseShape, selectKernels, writeRandomModel } from '../shards/index.js'
import type { TensorDType } from './options.js'

/*
 * What the swarm benchmarks (swarm, load, wan, swarm-canary, big-swarm) set up before they
 * measure: the model file, the spans of the node processes and a prompt of a given length.
 */

/**
 * A model file path, writing a random-weight GGUF for a shape name once (to the temp folder, kept
 * for the next run); `seqLen` gives the generated model that context instead of its shape's.
 */
export function resolveModel(
  o: { readonly model: string; readonly dtype: TensorDType; readonly seed: number; readonly seqLen?: number },
  bench = 'swarm'
): { path: string; shape?: string } {
  if (existsSync(o.model)) return { path: o.model }
  const shape = parseShape(o.model)
  const ctx = o.seqLen === undefined ? '' : `-ctx${o.seqLen}`
  const path = join(tmpdir(), `layerswarm-bench-${shape.name}-${o.dtype}-s${o.seed}${ctx}.gguf`)
  if (!existsSync(path)) {
    process.stderr.write(`bench ${bench}: writing ${path}\n`)
    writeRandomModel(`${path}.part`, shape, {
      dtype: o.dtype,
      seed: o.seed,
      ...(o.seqLen === undefined ? {} : { seqLen: o.seqLen })
    })
    renameSync(`${path}.part`, path) // only once complete, so an interrupted write is never reused
  }
  return { path, shape: shape.name }
}

/** [start, end) spans of `peers` nearly equal parts of blocks [from, to). */
export function evenSpans(from: number, to: number, peers: number): Array<[number, number]> {
  const n = to - from
  if (peers < 1 || peers > n) throw new Error(`bench swarm: ${peers} peers cannot split ${n} remote blocks`)
  return Array.from({ length: peers }, (_, i) => [from + Math.floor((i * n) / peers), from + Math.floor(((i + 1) * n) / peers)])
}

/** A prompt text that encodes to `n` tokens: pieces spread over the vocabulary, each kept if it adds exactly one. */
export function promptText(model: ModelFile, n: number): string {
  const tokenizer = createTokenizer(model.vocabulary!)
  const v = model.config.vocabSize
  const count = (text: string): number => tokenizer.encode(text).length
  const base = count('')
  let text = ''
  for (let i = 0; count(text) - base < n && i < 100 * n; i++) {
    const next = text + tokenizer.decode([3 + ((i * 7919) % (v - 3))])
    if (count(next) === count(text) + 1) text = next
  }
  return text
}

/**
 * A client of the local swarm for a speed benchmark: every node as bootstrap, the benchmark's
 * kernels and edge blocks, long timeouts (a big span is slow on a loaded host), no canaries (the
 * speed of the swarm path itself; bench canary measures canaries), failovers on stderr. Closing
 * it closes its kernels too.
 */
export async function swarmBenchClient(
  bench: string,
  path: string,
  nodes: readonly LocalNode[],
  o: { readonly kernels: KernelKind; readonly threads: number; readonly edgeFirst: number; readonly edgeLast: number },
  init: Pick<ClientInit, 'forwarding' | 'wireDtype' | 'speculate'> & { readonly onEvent?: (e: Record<string, unknown>) => void }
): Promise<{ client: LayerswarmClient; close(): Promise<void> }> {
  const kernels = selectKernels({ kind: o.kernels, threads: o.threads })
  const { onEvent, ...rest } = init
  const client = await createClient({
    bootstrap: nodes.map((n) => n.addrs[0]),
    model: path,
    edgeFirst: o.edgeFirst,
    edgeLast: o.edgeLast,
    ...rest,
    kernels,
    routeTimeoutMs: 60_000,
    stepTimeoutMs: 120_000,
    canaries: false,
    log: (e) => {
      onEvent?.(e)
      if (e.event === 'failover') process.stderr.write(`bench ${bench}: ${JSON.stringify(e)}\n`)
    }
  })
  return {
    client,
    async close() {
      await client.close()
      kernels.close?.()
    }
  }
}
