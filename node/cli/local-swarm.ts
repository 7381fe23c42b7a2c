import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { AbortOptions } from '@libp2p/interface'
import { NodeExitedError, NodeStartTimeoutError } from '../errors.js'
import { DEFAULT_NODE_START_TIMEOUT_MS } from '../options.js'
import { packageRoot } from '../paths.js'

/** A `layerswarm node start` child process on this machine. */
export interface LocalNode {
  readonly peerId: string
  readonly addrs: string[]
  readonly layers: [number, number]
  readonly modelId: string
  /** One session's KV cache bytes over the whole context (the serving line's kvBytes). */
  readonly kvBytes?: number
  readonly process: ChildProcess
  /** Lines the node logged on stderr. */
  readonly logs: string[]
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>
  /** SIGKILL: a crash, for failover tests. */
  kill(): void
}

export interface StartNodeOptions {
  readonly model?: string
  readonly layers?: string
  readonly bootstrap?: string[]
  readonly args?: string[]
  readonly startTimeoutMs?: number
  readonly env?: NodeJS.ProcessEnv
}

/** The compiled CLI, also when this module runs from source (tests): node processes run dist/. */
const CLI = import.meta.url.endsWith('.ts')
  ? join(packageRoot(), 'dist', 'node', 'cli.js')
  : fileURLToPath(new URL('../cli.js', import.meta.url))

/** Start a node process and wait for its "serving" JSON line; `signal` aborts the start (the process is killed). */
export async function startLocalNode(o: StartNodeOptions = {}, { signal }: AbortOptions = {}): Promise<LocalNode> {
  signal?.throwIfAborted()
  const args = [CLI, 'node', 'start']
  if (o.model) args.push('--model', o.model)
  if (o.layers) args.push('--layers', o.layers)
  if (o.bootstrap?.length) args.push('--bootstrap', o.bootstrap.join(','))
  args.push(...(o.args ?? []))
  // nodes default to an f16 KV cache; a swarm on this machine (tests, the demo) keeps f32 unless
  // told otherwise, so its output stays bit-identical to one process (docs/design.md)
  if (!o.args?.includes('--kv-dtype')) args.push('--kv-dtype', 'f32')
  // many nodes on one machine: each its own throwaway key, unless the caller names a key file
  if (!o.args?.includes('--identity')) args.push('--ephemeral-identity')
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: o.env ?? process.env })
  const logs: string[] = []
  createInterface({ input: child.stderr! }).on('line', (l) => logs.push(l))
  const lines = createInterface({ input: child.stdout! })
  const first = await new Promise<string>((resolve, reject) => {
    const onAbort = (): void => {
      child.kill('SIGKILL')
      reject(signal?.reason)
    }
    // a node that did not start in time is killed: it must not serve on, orphaned, after the caller gave up
    const startTimeoutMs = o.startTimeoutMs ?? DEFAULT_NODE_START_TIMEOUT_MS
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      child.kill('SIGKILL')
      reject(new NodeStartTimeoutError(`node did not start within ${startTimeoutMs} ms:\n${logs.join('\n')}`))
    }, startTimeoutMs)
    const settled = (): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    lines.once('line', (l) => {
      settled()
      resolve(l)
    })
    child.once('exit', (code) => {
      settled()
      reject(new NodeExitedError(`node exited with ${code} before serving:\n${logs.join('\n')}`))
    })
  })
  const info = JSON.parse(first) as { peerId: string; addrs: string[]; layers: [number, number]; modelId: string }
  const exited = once(child, 'exit')
  return {
    ...info,
    process: child,
    logs,
    async stop(graceMs = 5_000) {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs)
      await exited
      clearTimeout(t)
    },
    kill() {
      child.kill('SIGKILL')
    }
  }
}
