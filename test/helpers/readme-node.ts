/**
 * A `node start` exactly as the README shows it (no identity flag, no test-only flag), with its
 * own LAYERSWARM_HOME: what a new user runs, several times on one machine (issue #31).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { CLI } from './cli.js'
import { ROOT } from './reference.js'

export interface ReadmeNode {
  readonly peerId: string
  readonly identity?: string
  readonly addrs: string[]
  readonly layers: [number, number]
  readonly process: ChildProcess
  readonly stderr: string[]
  /** Send `signal`; resolves with the exit status (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

export async function startReadmeNode(home: string, args: string[], timeoutMs = 90_000): Promise<ReadmeNode> {
  const child = spawn(process.execPath, [CLI, 'node', 'start', ...args], {
    cwd: ROOT,
    env: { ...process.env, LAYERSWARM_HOME: home },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const stderr: string[] = []
  createInterface({ input: child.stderr! }).on('line', (l) => stderr.push(l))
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  const line = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`node start did not serve within ${timeoutMs} ms:\n${stderr.join('\n')}`))
    }, timeoutMs)
    createInterface({ input: child.stdout! }).once('line', (l) => {
      clearTimeout(t)
      resolve(l)
    })
    void exited.then((code) => {
      clearTimeout(t)
      reject(new Error(`node start exited with ${code} before serving:\n${stderr.join('\n')}`))
    })
  })
  const info = JSON.parse(line) as { peerId: string; identity?: string; addrs: string[]; layers: [number, number] }
  return {
    ...info,
    process: child,
    stderr,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
      child.kill(signal)
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000)
      const code = await exited
      clearTimeout(t)
      return code
    }
  }
}
