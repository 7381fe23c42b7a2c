import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { ROOT } from './reference.js'

/** The compiled CLI (npm test builds first, see the pretest script). */
export const CLI = join(ROOT, 'dist', 'node', 'cli.js')

export function runCli(args: string[], timeoutMs = 60_000): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}
