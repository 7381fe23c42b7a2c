import { buildNativeLlamaCpp, llamaGreedy } from './crosscheck/llama-cpp-native.js'
import type { EngineBenchOptions } from './engine.js'

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d

/**
 * llama.cpp built natively (bench/crosscheck/llama-cpp-native.ts; built on first use): the same
 * prompt ids, then genTokens greedy steps, `runs` times (after one warm-up), medians; and
 * whether its greedy tokens equal ours.
 */
export function nativeSide(
  o: EngineBenchOptions,
  prompt: number[],
  ours: number[],
  ourMargins: number[],
  decodeTps: number,
  prefillTps: number
): Record<string, unknown> {
  try {
    const tools = buildNativeLlamaCpp((line) => process.stderr.write(`bench engine: ${line}\n`))
    const runs = Array.from({ length: o.runs + 1 }, () => llamaGreedy(tools, o.model, o.threads, o.genTokens + 1, prompt)).slice(
      1
    )
    const decode = median(runs.map((r) => (r.decodeSteps * 1000) / r.decodeMs))
    const prefillRate = median(runs.map((r) => (o.promptTokens * 1000) / r.prefillMs))
    const theirs = runs[0].tokens
    const firstDiff = ours.findIndex((t, i) => t !== theirs[i])
    return {
      ok: true,
      llamaCpp: tools.tag,
      build: 'cmake -DGGML_NATIVE=ON (AMX off), OpenMP',
      decodeTokensPerSecond: round(decode),
      prefillTokensPerSecond: round(prefillRate),
      decodeRuns: runs.map((r) => round((r.decodeSteps * 1000) / r.decodeMs)),
      prefillRuns: runs.map((r) => round((o.promptTokens * 1000) / r.prefillMs)),
      decodeRatio: round(decodeTps / decode, 3),
      prefillRatio: round(prefillTps / prefillRate, 3),
      greedyTokensEqual: firstDiff === -1,
      greedyFirstDiff: firstDiff === -1 ? null : firstDiff,
      // Top-1 minus top-2 logit of each side at the first differing step (same history up to
      // it): two engines' rounding may flip a near-tie; a margin far above the logits'
      // engine-to-engine differences would point at a numeric bug instead.
      ...(firstDiff === -1
        ? {}
        : { marginAtFirstDiff: { ours: round(ourMargins[firstDiff], 5), llamaCpp: round(runs[0].margins[firstDiff], 5) } })
    }
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message.slice(0, 400) : String(e) }
  }
}
