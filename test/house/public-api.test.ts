/**
 * The package's public API (issue 36 step 5): `layerswarm/client`, `/shards` and `/protocol` each
 * export a curated list (client/public.ts, shards/public.ts, protocol/public.ts). docs/api.md and
 * the API report docs/api-report.md are generated from them (`npm run gen:api`); this test
 * regenerates both and fails when the committed copies differ, so any change to the public
 * surface shows in review. It also holds the docs to the list: every name the README or docs/
 * import from the package is exported.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import ts from 'typescript'
import { afterAll, describe, expect, it } from 'vitest'
import * as client from '../../client/public.js'
import * as protocol from '../../protocol/public.js'
import * as shards from '../../shards/public.js'

const repo = join(import.meta.dirname, '..', '..')
const fresh = mkdtempSync(join(tmpdir(), 'layerswarm-api-'))
afterAll(() => rmSync(fresh, { recursive: true, force: true }))

/** `import { a, b } from 'layerswarm/x'` in the README's and docs' code. */
function documentedImports(): Array<{ file: string; entry: string; name: string }> {
  const files = ['README.md', ...readdirSync(join(repo, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'))
  return files.flatMap((file) =>
    [...readFileSync(join(repo, file), 'utf8').matchAll(/import\s*\{([^}]*)\}\s*from\s*'layerswarm\/(\w+)'/g)].flatMap((m) =>
      m[1]
        .split(',')
        .map((n) => n.replace(/^\s*type\s+/, '').trim())
        .filter((n) => n !== '')
        .map((name) => ({ file, entry: m[2], name }))
    )
  )
}

/** Every ```ts block of the README, docs/ and the entry points' @example that imports the package. */
function documentedExamples(): Array<{ file: string; code: string }> {
  const files = ['README.md', ...readdirSync(join(repo, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'))
  return files.flatMap((file) =>
    [...readFileSync(join(repo, file), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)]
      .map((m) => ({ file, code: m[1] }))
      .filter((e) => e.code.includes("from 'layerswarm/"))
  )
}

describe('public API (package.json exports)', () => {
  it('every documented example that imports the package type-checks against the public lists', () => {
    const examples = documentedExamples()
    expect(examples.length).toBeGreaterThanOrEqual(5) // README, design.md, and api.md's three entry points
    const dir = mkdtempSync(join(tmpdir(), 'layerswarm-examples-'))
    try {
      writeFileSync(join(dir, 'package.json'), '{"type":"module"}')
      const files = examples.map((e, i) => {
        const path = join(dir, `example-${i}.ts`)
        writeFileSync(path, `${e.code}\nexport {}\n`)
        return path
      })
      const program = ts.createProgram(files, {
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        strict: true,
        skipLibCheck: true,
        noEmit: true,
        types: ['node'],
        typeRoots: [join(repo, 'node_modules', '@types')],
        baseUrl: repo,
        paths: Object.fromEntries(['client', 'shards', 'protocol'].map((e) => [`layerswarm/${e}`, [`${e}/public.ts`]]))
      })
      const errors = ts
        .getPreEmitDiagnostics(program)
        .filter((d) => d.file !== undefined && files.includes(d.file.fileName))
        .map((d) => `${examples[files.indexOf(d.file!.fileName)].file}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`)
      expect(errors).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it('docs/api.md and docs/api-report.md are what npm run gen:api writes now', () => {
    execFileSync(process.execPath, [join(repo, 'scripts', 'gen-api.mjs'), fresh])
    for (const name of ['api.md', 'api-report.md']) {
      const same = readFileSync(join(repo, 'docs', name), 'utf8') === readFileSync(join(fresh, name), 'utf8')
      expect(same, `docs/${name} is stale: run npm run gen:api and commit it`).toBe(true)
    }
  }, 120_000)

  it('exports every name the README and docs/ import from the package', () => {
    const entries: Record<string, Record<string, unknown>> = { client, protocol, shards }
    const report = readFileSync(join(repo, 'docs', 'api-report.md'), 'utf8')
    const imports = documentedImports()
    expect(imports.length).toBeGreaterThan(0)
    for (const { file, entry, name } of imports) {
      expect(entries[entry], `${file}: no entry point layerswarm/${entry}`).toBeDefined()
      const listed = name in entries[entry] || new RegExp(`^(interface|type|class) ${name}\\b`, 'm').test(report)
      expect(listed, `${file} imports ${name} from layerswarm/${entry}, which does not export it`).toBe(true)
    }
  })

  it('documents every exported function and class (its TSDoc summary is on docs/api.md)', () => {
    const rows = readFileSync(join(repo, 'docs', 'api.md'), 'utf8').match(/^\| `\w+` \| (function|class) \|.*$/gm) ?? []
    expect(rows.length).toBeGreaterThan(20)
    expect(rows.filter((r) => r.endsWith('|  |'))).toEqual([])
  })

  it('maps each package entry point to its curated list, not the folder index', () => {
    const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
      exports: Record<string, { default: string } | string>
    }
    for (const entry of ['client', 'shards', 'protocol']) {
      expect(pkg.exports[`./${entry}`]).toEqual({ types: `./dist/${entry}/public.d.ts`, default: `./dist/${entry}/public.js` })
    }
  })
})
