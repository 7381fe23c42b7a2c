/**
 * The single-process side of bench/swarm.ts: the whole model in this process (same kernels,
 * threads and prompt as the swarm's client), kept loaded so it can be measured right before
 * each swarm measurement — on a shared, noisy machine a ratio of two runs minutes apart says
 * more about the neighbours' load than about the swarm.
 */
import {
  createEdge,
  createLocalPipeline,
  createShard,
  createTokenizer,
  generateTokens,
  type KernelKind,
  openModelFile,
  selectKernels
} from '../shards/index.js'

export interface SingleRun {
  readonly tokens: number[]
  readonly prefillMs: number
  readonly decodeTokensPerSecond: number
}

export interface SingleProcess {
  readonly kernels: string
  readonly promptTokens: number
  run(maxTokens: number): Promise<SingleRun>
  close(): void
}

/** Decode tokens/s from the times tokens were yielded: the first one ends the prefill. */
export function decodeRate(times: number[]): number {
  return times.length < 2 ? Number.NaN : ((times.length - 1) * 1000) / (times[times.length - 1] - times[0])
}

export async function openSingleProcess(
  path: string,
  o: { kernels: KernelKind; threads: number },
  prompt: string
): Promise<SingleProcess> {
  const model = openModelFile(path)
  const kernels = selectKernels({ kind: o.kernels, threads: o.threads })
  const edge = createEdge({ model, kernels })
  const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels })
  const tokenizer = createTokenizer(model.vocabulary!)
  const promptTokens = tokenizer.encode(prompt)
  let runs = 0
  const run = async (n: number): Promise<SingleRun> => {
    const pipeline = createLocalPipeline([shard], `run-${runs++}`, promptTokens.length + n)
    const tokens: number[] = []
    const times: number[] = []
    const t0 = performance.now()
    for await (const t of generateTokens({
      edge,
      pipeline,
      promptTokens,
      maxTokens: n,
      temperature: 0,
      stopIds: tokenizer.stopIds
    })) {
      tokens.push(t)
      times.push(performance.now())
    }
    await pipeline.close()
    return { tokens, prefillMs: times[0] - t0, decodeTokensPerSecond: decodeRate(times) }
  }
  await run(4) // JIT and scratch buffers, as every swarm peer warmed up at start
  return {
    kernels: kernels.name,
    promptTokens: promptTokens.length,
    run,
    close() {
      kernels.close?.()
      model.close()
    }
  }
}
