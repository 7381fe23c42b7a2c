import { spawn } from 'node:child_process'
import { CLI } from './cli.js'
import { ROOT } from './reference.js'

export interface CliRun {
  status: number | null
  stdout: string
  stderr: string
}

/** Run the CLI as its own process without blocking (node processes of a swarm keep running meanwhile). */
export function cliAsync(args: string[], timeoutMs = 60_000, env: NodeJS.ProcessEnv = process.env): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (status) => {
      clearTimeout(t)
      resolve({ status, stdout, stderr })
    })
  })
}

/** What every CLI error must look like: one line with a code, no stack trace. */
export const ONE_LINE_ERROR = /^layerswarm: [^\n]+ \(([A-Z_]+)\)\n$/
