/**
 * The layering of docs/design.md §1, enforced by dependency-cruiser (.dependency-cruiser.cjs; issue
 * 36 step 6). `npm run lint` runs the rules over the repository; this test proves each rule can
 * fail: it plants upward imports, an inner-file import and a cycle in a temp tree laid out like
 * ours, and asserts the checker names exactly the broken rules. Also the file-size guard.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const repo = join(import.meta.dirname, '..', '..')
const config = join(repo, '.dependency-cruiser.cjs')
const depcruise = join(repo, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs')
const FOLDERS = ['shards', 'crypto', 'protocol', 'canary', 'client', 'node']
const temps: string[] = []
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true })
})

interface Violation {
  rule: { name: string }
  from: string
  to: string
}

/** Runs dependency-cruiser with our rules over `files` written to a fresh temp tree. */
function cruise(files: Record<string, string>): Violation[] {
  const root = mkdtempSync(join(tmpdir(), 'layerswarm-deps-'))
  temps.push(root)
  const tsconfig = { compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }
  writeFileSync(join(root, 'tsconfig.json'), JSON.stringify(tsconfig))
  writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module' }))
  for (const folder of FOLDERS) files[`${folder}/index.ts`] ??= 'export const here = 1\n'
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  const r = spawnSync(process.execPath, [depcruise, '--config', config, '--output-type', 'json', ...FOLDERS], {
    cwd: root,
    encoding: 'utf8'
  })
  if (r.stdout === '') throw new Error(`dependency-cruiser did not run: ${r.stderr}`)
  const result = JSON.parse(r.stdout) as { summary: { violations: Violation[] } }
  return result.summary.violations
}

const rulesOf = (violations: Violation[]): string[] => [...new Set(violations.map((v) => v.rule.name))].sort()

describe('folder boundaries (dependency-cruiser, docs/design.md §1)', () => {
  it('accepts imports the design allows: down the layers, through index.ts, free inside a folder', () => {
    const violations = cruise({
      'shards/kernels/f16.ts': 'export const f16 = 1\n',
      'shards/errors.ts': 'export class E extends Error {}\n',
      'shards/index.ts': "export * from './kernels/f16.js'\nexport * from './errors.js'\n",
      'protocol/index.ts': "export { f16 } from '../shards/kernels/f16.js'\nexport { E } from '../shards/errors.js'\n",
      'canary/index.ts': "import { f16 } from '../shards/index.js'\nexport const c = f16\n",
      'client/routing/route.ts': "import { here } from '../session/step.js'\nexport const r = here\n",
      'client/session/step.ts': "import { f16 } from '../../protocol/index.js'\nexport const here = f16\n",
      'client/index.ts': "export * from './routing/route.js'\nimport '../protocol/polyfills.js'\n",
      'protocol/polyfills.ts': 'export {}\n',
      'node/cli/run.ts': "import { r } from '../../client/index.js'\nexport const run = r\n",
      'node/server.ts': "import { c } from '../canary/index.js'\nexport const s = c\n"
    })
    expect(violations).toEqual([])
  }, 60_000)

  it('fails on an upward import, an inner-file import, the daemon importing client/, and a cycle', () => {
    const violations = cruise({
      // upward: the engine reaching for the wire
      'shards/block.ts': "import { here } from '../protocol/index.js'\nexport const b = here\n",
      // crypto is a leaf too
      'crypto/seal.ts': "import { here } from '../canary/index.js'\nexport const s = here\n",
      // protocol may take only the engine's leaves
      'protocol/codec.ts': "import { b } from '../shards/block.js'\nexport const c = b\n",
      // canary below client and protocol
      'canary/detector.ts': "import { here } from '../client/index.js'\nexport const d = here\n",
      // around client/index.ts, into an inner file of another folder
      'node/cli/run.ts': "import { r } from '../../client/routing/route.js'\nexport const run = r\n",
      'client/routing/route.ts': 'export const r = 1\n',
      // the daemon is not a client
      'node/server.ts': "import { here } from '../client/index.js'\nexport const s = here\n",
      // a cycle inside one folder
      'client/a.ts': "import { b } from './b.js'\nexport const a = () => b\n",
      'client/b.ts': "import { a } from './a.js'\nexport const b = () => a\n"
    })
    expect(rulesOf(violations)).toEqual([
      'canary-imports-shards-and-crypto',
      'crypto-imports-nothing-of-ours',
      'daemon-never-imports-client',
      'no-cycles',
      'other-folders-through-index',
      'protocol-imports-only-engine-leaves',
      'shards-imports-nothing-of-ours'
    ])
    const through = violations.filter((v) => v.rule.name === 'other-folders-through-index').map((v) => `${v.from} → ${v.to}`)
    expect(through).toEqual(expect.arrayContaining(['node/cli/run.ts → client/routing/route.ts']))
  }, 60_000)

  it('fails when production code imports a test rig or a benchmark', () => {
    const violations = cruise({
      'bench/rig.ts': 'export const rig = 1\n',
      'node/server.ts': "import { rig } from '../bench/rig.js'\nexport const s = rig\n"
    })
    expect(rulesOf(violations)).toEqual(['production-never-imports-bench-or-test'])
  }, 60_000)
})

/** Files stay readable (docs/design.md conventions: files under ~300 lines); generated code is exempt. */
const MAX_LINES = 320

describe('file size', () => {
  it(`keeps every source file under ${MAX_LINES} lines`, () => {
    const walk = (dir: string): string[] =>
      readdirSync(join(repo, dir), { withFileTypes: true }).flatMap((e) => {
        const path = `${dir}/${e.name}`
        if (e.isDirectory()) return e.name === 'generated' || e.name === 'node_modules' ? [] : walk(path)
        return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : []
      })
    const long = [...FOLDERS, 'bench']
      .flatMap(walk)
      .filter((f) => !f.startsWith('shards/asm/'))
      .map((f) => `${f}: ${readFileSync(join(repo, f), 'utf8').split('\n').length} lines`)
      .filter((line) => Number(line.split(': ')[1].split(' ')[0]) > MAX_LINES)
    expect(long).toEqual([])
  })
})
