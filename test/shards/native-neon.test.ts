import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

// Issue 40: the Arm NEON kernels (shards/native/neon-q8.cc) against the canonical scalar Q8_0
// arithmetic, bit for bit, by a standalone driver (shards/native/neon-check.cc) cross-compiled
// with Debian's g++-aarch64-linux-gnu and run under qemu-user, once with the dotprod extension
// (SDOT) and once without (widening multiplies). Correctness only: timings under an emulator say
// nothing. The same driver built natively checks this machine's x86 kernels too. CI installs the
// tools (.ci/run); elsewhere the Arm half skips without them, and fails with CI set.

const here = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'shards', 'native')
const SOURCES = ['neon-check.cc', 'matmul.cc', 'matmul-q8-avx2.cc', 'decode.cc', 'neon-q8.cc'].map((f) => join(here, f))
const FLAGS = ['-O2', '-std=c++17', '-ffp-contract=off', '-Wno-psabi']
const dir = mkdtempSync(join(tmpdir(), 'ls-neon-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function has(tool: string): boolean {
  try {
    execFileSync(tool, ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

const CROSS = 'aarch64-linux-gnu-g++'
const QEMU = 'qemu-aarch64'
const armTools = has(CROSS) && has(QEMU)

describe('NEON kernels under qemu-user (correctness only)', () => {
  it('the cross tools are there where CI runs', () => {
    if (process.env.CI) expect(armTools, `${CROSS} and ${QEMU} (apt: g++-aarch64-linux-gnu qemu-user)`).toBe(true)
  })

  for (const [name, march, isa] of [
    ['with dotprod (SDOT)', 'armv8.2-a+dotprod', 'neon-dotprod'],
    ['without dotprod', 'armv8-a', 'neon']
  ] as const) {
    it.skipIf(!armTools)(
      `Q8_0 decode and batched, ${name}: equal to the scalar definition bit for bit`,
      () => {
        const bin = join(dir, `check-${isa}`)
        execFileSync(CROSS, [...FLAGS, '-static', `-march=${march}`, ...SOURCES, '-o', bin], { stdio: 'pipe' })
        const out = execFileSync(QEMU, ['-cpu', 'max', bin], { encoding: 'utf8' })
        expect(out).toContain(`isa ${isa}, decode kernels yes`)
        expect(out).toMatch(/^ok \d+$/m)
      },
      120_000
    )
  }

  it.skipIf(process.arch !== 'x64' || !has('g++'))(
    'the same driver on this machine (AVX2 forced): the x86 Q8_0 kernels agree',
    () => {
      const bin = join(dir, 'check-avx2')
      execFileSync('g++', [...FLAGS, '-march=x86-64-v3', ...SOURCES, '-o', bin], { stdio: 'pipe' })
      const out = execFileSync(bin, { encoding: 'utf8' })
      expect(out).toContain('isa avx2, decode kernels yes')
      expect(out).toMatch(/^ok \d+$/m)
    },
    120_000
  )
})
