import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'

// "One error class per condition with a `code`, in the folder's errors.ts" (the project's style
// rule; issue #20 found classes defined twice and outside errors.ts, and Errors with patched codes).

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const LIBRARY = ['node', 'protocol', 'client', 'shards', 'canary', 'crypto']

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name)
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'build' ? [] : sources(path)
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : []
  })
}

const files = LIBRARY.flatMap((folder) => sources(join(repoRoot, folder))).map((path) => ({
  file: relative(repoRoot, path),
  text: readFileSync(path, 'utf8')
}))
const ERROR_CLASS = /^export class (\w+) extends (\w*Error)\b/gm

describe('error classes', () => {
  const classes = files.flatMap(({ file, text }) => [...text.matchAll(ERROR_CLASS)].map((m) => ({ file, name: m[1] })))

  test('the scan sees the classes it is about', () => {
    expect(classes.some((c) => c.name === 'UnknownSessionError')).toBe(true)
    expect(classes.length).toBeGreaterThan(50)
  })

  test('every error class lives in its folder’s errors.ts', () => {
    expect(classes.filter((c) => !c.file.endsWith('errors.ts')).map((c) => `${c.file}: ${c.name}`)).toEqual([])
  })

  test('each condition has one class: no name is defined twice', () => {
    const seen = new Map<string, string[]>()
    for (const c of classes) seen.set(c.name, [...(seen.get(c.name) ?? []), c.file])
    expect([...seen].filter(([, where]) => where.length > 1).map(([name, where]) => `${name}: ${where.join(', ')}`)).toEqual([])
  })

  test('no Error gets a code patched on', () => {
    const patched = files.filter(({ text }) => /Object\.assign\(\s*new \w*Error\(/.test(text)).map(({ file }) => file)
    expect(patched).toEqual([])
  })
})
