/**
 * One client of the load benchmark in its own process (bench/load-clients.ts forks it): on `init`
 * it opens a client to the swarm and warms it up, then generates its prompt on each `run` and
 * answers with the tokens and their arrival times; `close` ends it.
 */
import { type LayerswarmClient as Client, createClient } from '../client/index.js'
import { errorCode, type Kernels, selectKernels } from '../shards/index.js'
import { clientInit, type LoadClientConfig, runClient } from './load-clients.js'

type Message = { type: 'init'; config: LoadClientConfig; prompt: string } | { type: 'run' } | { type: 'close' }

let client: Client | undefined
let kernels: Kernels | undefined
let config: LoadClientConfig | undefined
let prompt = ''
const busy = { n: 0 }

function reply(m: unknown): void {
  process.send?.(m)
}

process.on('message', async (m: Message) => {
  try {
    if (m.type === 'init') {
      config = m.config
      prompt = m.prompt
      kernels = selectKernels({ kind: config.kernels, threads: config.threads })
      client = await createClient(clientInit(config, kernels, busy))
      await client.generate(prompt, { maxTokens: config.warmupTokens, temperature: 0 })
      reply({ type: 'ready' })
    } else if (m.type === 'run') {
      if (!client || !config) throw new Error('run before init')
      reply({ type: 'result', run: await runClient(client, prompt, config.maxTokens, busy) })
    } else if (m.type === 'close') {
      await client?.close().catch(() => {})
      kernels?.close?.()
      process.disconnect?.()
      process.exit(0)
    }
  } catch (err) {
    reply({ type: 'error', message: `${errorCode(err) ?? ''} ${(err as Error).message}` })
  }
})
