/**
 * `npm run bench -- family-speed --models A,B[,C...] [--prompt-tokens 16] [--gen-tokens 48]
 * [--rounds 5] [--threads 1]`: decode cost of model families of the same size, measured in one
 * process with the files interleaved (A, B, C, A, B, C, ...) so each round's ratios to A see the
 * same machine load. Besides wall-clock tokens per second it reports process CPU time per decode
 * step (process.cpuUsage), which a loaded shared host distorts far less than wall time. Ratios
 * are B/A per round (CPU time; above 1 is slower than A), then their median. Prints one JSON object.
 */
import { loadavg } from 'node:os'
import { createEdge, createLocalPipeline, createShard, openModelFile, selectKernelsFor } from '../shards/index.js'
import { benchArgs } from './options.js'

function argmax(a: Float32Array): number {
  let best = 0
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i
  return best
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const r3 = (x: number) => Math.round(x * 1000) / 1000

export async function main(argv: string[]): Promise<void> {
  const opts = benchArgs(argv, {
    models: undefined,
    'prompt-tokens': '16',
    'gen-tokens': '48',
    rounds: '5',
    threads: '1'
  })
  const paths = opts.string('models')?.split(',') ?? []
  if (paths.length < 2) opts.fail('--models needs at least two files, the first is the baseline')
  const promptTokens = opts.int('prompt-tokens', 1)
  const genTokens = opts.int('gen-tokens', 1)
  const rounds = opts.int('rounds', 1)
  const threads = opts.int('threads', 1)
  const loaded = paths.map((path) => {
    const model = openModelFile(path)
    const kernels = selectKernelsFor(model.config, { threads })
    const edge = createEdge({ model, kernels })
    const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels, kvDType: 'f16' })
    return { path, model, kernels, edge, shard }
  })
  const cpuUsPerToken: number[][] = paths.map(() => [])
  const wallTps: number[][] = paths.map(() => [])
  const loads: number[] = []
  for (let r = 0; r < rounds; r++) {
    loads.push(loadavg()[0])
    for (const [i, m] of loaded.entries()) {
      const vocab = m.model.config.vocabSize
      const prompt = Array.from({ length: promptTokens }, (_, k) => 3 + ((k * 7919) % (vocab - 3)))
      const pipeline = createLocalPipeline([m.shard], `speed-${r}-${i}`, promptTokens + genTokens + 1)
      let h = await pipeline.forward(m.edge.embed(prompt), 0)
      let tok = argmax(m.edge.lastLogits(h, promptTokens))
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      for (let s = 0; s < genTokens; s++) {
        h = await pipeline.forward(m.edge.embed([tok]), promptTokens + s)
        tok = argmax(m.edge.lastLogits(h, 1))
      }
      const wallMs = performance.now() - t0
      const cpu = process.cpuUsage(cpu0)
      await pipeline.close()
      cpuUsPerToken[i].push((cpu.user + cpu.system) / genTokens)
      wallTps[i].push((genTokens * 1000) / wallMs)
    }
  }
  const kernels = loaded[0].kernels.name
  for (const m of loaded) {
    m.model.close()
    m.kernels.close?.()
  }
  const ratios = paths.map((_, i) => cpuUsPerToken[i].map((us, r) => us / cpuUsPerToken[0][r]))
  const wallRatios = paths.map((_, i) => wallTps[i].map((t, r) => wallTps[0][r] / t))
  console.log(
    JSON.stringify(
      {
        bench: 'family-speed',
        kernels,
        threads,
        promptTokens,
        genTokens,
        rounds,
        loadAverage1m: loads.map((l) => Math.round(l * 10) / 10),
        models: paths.map((path, i) => ({
          path,
          architecture: loaded[i].model.config.architecture,
          decodeCpuUsPerTokenMedian: Math.round(median(cpuUsPerToken[i])),
          decodeTokensPerSecondMedian: r3(median(wallTps[i])),
          cpuRatioToFirstMedian: r3(median(ratios[i])),
          cpuRatioToFirstRuns: ratios[i].map(r3),
          wallRatioToFirstMedian: r3(median(wallRatios[i]))
        }))
      },
      null,
      2
    )
  )
}
