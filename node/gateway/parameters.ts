import { invalidRequest } from './errors.js'

/**
 * Every request parameter of every generating endpoint, and what the gateway does with it
 * (issue 37). docs/gateway.md lists the same table; test/docs/gateway-parameters.test.ts checks
 * the two agree. `refused` parameters (and unknown ones) get HTTP 400 in the endpoint's error
 * shape; a refused one set to its neutral value (`neutral`) passes, as OpenAI clients send
 * defaults explicitly.
 */
export type ParameterStatus = 'supported' | 'ignored' | 'refused'

interface Parameter {
  readonly status: ParameterStatus
  /** A refused parameter set to this passes (it asks for nothing the gateway does not do). */
  readonly neutral?: unknown
}

const S: Parameter = { status: 'supported' }
const I: Parameter = { status: 'ignored' }
const R: Parameter = { status: 'refused' }
const R0: Parameter = { status: 'refused', neutral: 0 }

const SAMPLING = {
  model: S,
  max_tokens: S,
  temperature: S,
  top_p: S,
  n: S,
  stream: S,
  stream_options: S,
  stop: S,
  seed: S,
  logprobs: S
}
const OPENAI_COMMON = {
  frequency_penalty: R0,
  presence_penalty: R0,
  logit_bias: R,
  user: I,
  metadata: I,
  service_tier: I,
  layerswarm: S
}

export const PARAMETERS: Readonly<Record<string, Readonly<Record<string, Parameter>>>> = {
  '/v1/chat/completions': {
    ...SAMPLING,
    ...OPENAI_COMMON,
    messages: S,
    max_completion_tokens: S,
    top_logprobs: S,
    response_format: S,
    tools: S,
    tool_choice: S,
    parallel_tool_calls: S,
    store: { status: 'refused', neutral: false },
    functions: R,
    function_call: R,
    modalities: R,
    audio: R,
    prediction: R,
    reasoning_effort: R,
    web_search_options: R
  },
  '/v1/completions': {
    ...SAMPLING,
    ...OPENAI_COMMON,
    prompt: S,
    echo: { status: 'refused', neutral: false },
    best_of: { status: 'refused', neutral: 1 },
    suffix: R
  },
  '/v1/messages': {
    model: S,
    messages: S,
    max_tokens: S,
    system: S,
    stop_sequences: S,
    stream: S,
    temperature: S,
    top_p: S,
    tools: S,
    tool_choice: S,
    metadata: I,
    service_tier: I,
    top_k: R,
    thinking: R
  }
}

/** Refuse a request's refused and unknown parameters (before any other check reads them). */
export function checkParameters(endpoint: keyof typeof PARAMETERS, body: Record<string, unknown>): void {
  const known = PARAMETERS[endpoint]
  for (const [key, value] of Object.entries(body)) {
    const p = known[key]
    if (!p) throw invalidRequest(`Unrecognized request argument supplied: ${key}`, key, 'unknown_parameter')
    if (p.status !== 'refused' || value === undefined || value === null || value === p.neutral) continue
    throw invalidRequest(
      `'${key}' is not supported by this gateway (docs/gateway.md lists what is).`,
      key,
      'unsupported_parameter'
    )
  }
}
