import { type ApiOptions, type RunningApi, runApi } from '../../node/cli/commands/api.js'
import { type GenerateResult, runLocalGenerate } from '../../node/cli/commands/generate/generate.js'
import { createLogger } from '../../node/log.js'

/**
 * The gateway the e2e tests start (`layerswarm api`): on a free loopback port, edges 1+1 kept by
 * the gateway, relay forwarding, f32 on the wire, no canaries, silent; `o` overrides any of it.
 */
export function gatewayOptions(o: Partial<ApiOptions> & { bootstrap: string; model: string }): ApiOptions {
  return {
    listen: '127.0.0.1:0',
    maxConcurrent: 2,
    edgeFirst: 1,
    edgeLast: 1,
    forwarding: 'relay',
    wire: 'f32',
    canaryRate: 0,
    routeTimeout: 20_000,
    logLevel: 'silent',
    ...o
  }
}

/** runApi with gatewayOptions(o) and a silent log. */
export async function startGatewayApi(o: Partial<ApiOptions> & { bootstrap: string; model: string }): Promise<RunningApi> {
  return await runApi(gatewayOptions(o), createLogger({ level: 'silent' }))
}

/** `layerswarm generate --chat --temperature 0 --kernels reference` in this process: what a gateway chat must answer. */
/** One process's greedy generation (reference kernels), as plain text or as one chat turn. */
export async function localGreedy(
  model: string,
  prompt: string,
  maxTokens: number,
  { chat = false }: { chat?: boolean } = {}
): Promise<GenerateResult> {
  return await runLocalGenerate(
    {
      model,
      prompt,
      chat,
      maxTokens,
      temperature: 0,
      topK: 0,
      topP: 1,
      seed: 1,
      repetitionPenalty: 1,
      json: true,
      kernelKind: 'reference'
    },
    () => {}
  )
}

export async function localChatGreedy(model: string, prompt: string, maxTokens: number): Promise<GenerateResult> {
  return await localGreedy(model, prompt, maxTokens, { chat: true })
}
