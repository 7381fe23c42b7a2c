/**
 * The clients of the load benchmark (bench/load.ts), either all in the benchmark's process (one
 * event loop and one core for every client's edge work: the old way, `--client-mode shared`) or
 * each in its own process (`--client-mode process`, the default), as real clients are: each on
 * its own machine, so the aggregate is the swarm's, not one process's. A client process is
 * bench/load-client.ts, driven over the IPC channel: warm up, run when told, report its tokens
 * with their arrival times on one clock (performance.timeOrigin + now, shared by every process).
 */
import { type ChildProcess, fork } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type LayerswarmClient as Client, type ClientInit, createClient, type SpeculateMode } from '../client/index.js'
import { errorCode, type Kernels } from '../shards/index.js'

export interface ClientRun {
  readonly tokens: number[]
  /** Arrival time of each token, ms on the shared clock (timeOrigin + performance.now()). */
  readonly times: number[]
  readonly busy: number
  readonly error?: string
}

/** What every client is made of (its prompt aside): plain data, so a client process can get it. */
export interface LoadClientConfig {
  readonly bootstrap: string[]
  readonly model: string
  readonly forwarding: 'relay' | 'chain'
  readonly edgeFirst: number
  readonly edgeLast: number
  readonly kernels: 'auto' | 'reference' | 'wasm' | 'native'
  readonly threads: number
  readonly maxTokens: number
  readonly warmupTokens: number
  readonly speculate: SpeculateMode
}

export interface LoadClients {
  /** Client `i` generates its prompt (greedy). */
  run(i: number): Promise<ClientRun>
  close(): Promise<void>
}

export const now = (): number => performance.timeOrigin + performance.now()

export function clientInit(c: LoadClientConfig, kernels: Kernels | undefined, busy: { n: number }): ClientInit {
  return {
    bootstrap: c.bootstrap,
    model: c.model,
    forwarding: c.forwarding,
    edgeFirst: c.edgeFirst,
    edgeLast: c.edgeLast,
    kernels,
    canaries: false,
    speculate: c.speculate,
    routeTimeoutMs: 60_000,
    stepTimeoutMs: 120_000,
    banMs: 2_000,
    maxFailovers: 20,
    log: (e) => {
      if (e.event === 'failover' && e.code === 'BUSY') busy.n++
    }
  }
}

export async function runClient(client: Client, prompt: string, maxTokens: number, busy: { n: number }): Promise<ClientRun> {
  const times: number[] = []
  const busy0 = busy.n
  try {
    const it = client.stream(prompt, { maxTokens, temperature: 0 })
    let r = await it.next()
    while (!r.done) {
      times.push(now())
      r = await it.next()
    }
    return { tokens: r.value.tokens, times, busy: busy.n - busy0 }
  } catch (err) {
    return {
      tokens: [],
      times,
      busy: busy.n - busy0,
      error: `${errorCode(err) ?? ''} ${(err as Error).message}`
    }
  }
}

/** Every client in this process, sharing one kernel set (warmed up). */
export async function sharedClients(c: LoadClientConfig, prompts: readonly string[], kernels: Kernels): Promise<LoadClients> {
  const busy = { n: 0 }
  const clients: Client[] = []
  try {
    for (let i = 0; i < prompts.length; i++) clients.push(await createClient(clientInit(c, kernels, busy)))
    // warm up: routes, streams and JIT on every side
    await Promise.all(clients.map((cl, i) => cl.generate(prompts[i], { maxTokens: c.warmupTokens, temperature: 0 })))
  } catch (err) {
    await Promise.all(clients.map((cl) => cl.close().catch(() => {})))
    throw err
  }
  return {
    run: (i) => runClient(clients[i], prompts[i], c.maxTokens, busy),
    close: async () => {
      await Promise.all(clients.map((cl) => cl.close().catch(() => {})))
    }
  }
}

type Reply = { type: 'ready' } | { type: 'result'; run: ClientRun } | { type: 'error'; message: string }

/** Each client in its own process (bench/load-client.js beside this file), warmed up. */
export async function processClients(c: LoadClientConfig, prompts: readonly string[]): Promise<LoadClients> {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'load-client.js')
  const children: ChildProcess[] = []
  const waiting = new Map<ChildProcess, { resolve: (r: Reply) => void; reject: (e: Error) => void }>()
  const next = (child: ChildProcess): Promise<Reply> =>
    new Promise((resolve, reject) => {
      waiting.set(child, { resolve, reject })
    })
  const close = async (): Promise<void> => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve()
            const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
            child.once('exit', () => {
              clearTimeout(timer)
              resolve()
            })
            if (child.connected) child.send({ type: 'close' })
            else child.kill('SIGTERM')
          })
      )
    )
  }
  try {
    for (const prompt of prompts) {
      const child = fork(script, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
      children.push(child)
      child.on('message', (m: Reply) => {
        const w = waiting.get(child)
        waiting.delete(child)
        w?.resolve(m)
      })
      child.on('exit', (code, signal) => {
        const w = waiting.get(child)
        waiting.delete(child)
        w?.reject(new Error(`a load client process exited (${code ?? signal})`))
      })
      const ready = next(child)
      child.send({ type: 'init', config: c, prompt })
      // one at a time: each loads the model and opens its routes without the others' start-up
      const r = await ready
      if (r.type !== 'ready') throw new Error(`a load client failed to start: ${r.type === 'error' ? r.message : r.type}`)
    }
  } catch (err) {
    await close()
    throw err
  }
  return {
    async run(i) {
      const reply = next(children[i])
      children[i].send({ type: 'run' })
      const r = await reply
      if (r.type === 'result') return r.run
      return { tokens: [], times: [], busy: 0, error: r.type === 'error' ? r.message : 'no result' }
    },
    close
  }
}
