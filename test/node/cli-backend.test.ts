import { spawnSync } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CLI } from '../helpers/cli.js'
import { ROOT } from '../helpers/reference.js'

// Issue 32: a ggml backend that is not installed is one coded line naming what to install, and
// `--backend auto` without a GPU package serves on the CPU kernels after one log line.

function run(args: string[], home: string) {
  const env = { ...process.env, LAYERSWARM_HOME: home, LAYERSWARM_GGML_DIR: '', LAYERSWARM_BACKENDS_DIR: '' }
  return spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env })
}

describe('node start --backend', () => {
  it('a missing ggml package is BACKEND_UNAVAILABLE naming the install command', () => {
    const home = mkdtempSync(join(tmpdir(), 'layerswarm-backend-'))
    const r = run(
      ['node', 'start', '--backend', 'ggml-vulkan', '--layers', '1:4', '--ephemeral-identity', '--log-level', 'silent'],
      home
    )
    expect(r.status).toBe(1)
    const lines = r.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      /^layerswarm: ggml vulkan is not installed: run `layerswarm backend install vulkan` \(@node-llama-cpp\/[\w-]+@3\.21\.1\) \(BACKEND_UNAVAILABLE\)$/
    )
  })

  it('an unknown backend is refused by the option parser', () => {
    const r = run(
      ['node', 'start', '--backend', 'tpu', '--ephemeral-identity'],
      mkdtempSync(join(tmpdir(), 'layerswarm-backend-'))
    )
    expect(r.status).not.toBe(0)
    expect(r.stderr).toMatch(/--backend.*tpu/)
  })

  it('backend list without a package says what to install', () => {
    const r = run(['backend', 'list'], mkdtempSync(join(tmpdir(), 'layerswarm-backend-')))
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(
      /no backend installed \(`layerswarm backend install cpu\|vulkan\|cuda\|metal`\)|span addon is not built/
    )
  })
})
