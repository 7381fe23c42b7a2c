import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, test } from 'vitest'
import { errorCode } from '../../shards/index.js'

// A thrown value's code is read with one typed helper, `errorCode(err)` (shards/errors.ts), not a
// cast written out at every catch (issue 36: `(err as { code?: string }).code` was written out 20
// times). This test fails when such a cast comes back anywhere in the repository's TypeScript.

const ROOT = join(import.meta.dirname, '..', '..')
const FOLDERS = ['client', 'node', 'shards', 'protocol', 'canary', 'crypto', 'bench', 'scripts', 'test']
/** `x as { code?: string }`, `x as Error & { code?: string }`, `x as NodeJS.ErrnoException`. */
const CAST = /\bas\s+(?:Error\s*&\s*)?(?:\{\s*code\?\s*:\s*string\s*\}|NodeJS\.ErrnoException)/

function tsFiles(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'generated' || name === 'build') continue
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...tsFiles(path))
    // this file spells the pattern out to test it
    else if (name.endsWith('.ts') && name !== 'error-code-casts.test.ts') out.push(path)
  }
  return out
}

describe('error codes are read with errorCode(err)', () => {
  test('no file casts a thrown value to read its code', () => {
    const found: string[] = []
    for (const folder of FOLDERS)
      for (const file of tsFiles(join(ROOT, folder)))
        readFileSync(file, 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (CAST.test(line)) found.push(`${relative(ROOT, file)}:${i + 1}: ${line.trim()}`)
          })
    expect(found).toEqual([])
  })

  test('the pattern catches the cast it forbids', () => {
    // the guard must be able to fail: each spelling it forbids is matched
    for (const line of [
      'const c = (err as { code?: string }).code',
      'const e = err as Error & { code?: string }',
      'if ((e as NodeJS.ErrnoException).code === "EEXIST")'
    ])
      expect(CAST.test(line)).toBe(true)
    expect(CAST.test('const c = errorCode(err)')).toBe(false)
  })

  test('errorCode reads a string code and nothing else', () => {
    expect(errorCode(Object.assign(new Error('x'), { code: 'ENOENT' }))).toBe('ENOENT')
    expect(errorCode(new Error('no code'))).toBeUndefined()
    expect(errorCode({ code: 7 })).toBeUndefined()
    expect(errorCode(null)).toBeUndefined()
    expect(errorCode(undefined)).toBeUndefined()
    expect(errorCode('ENOENT')).toBeUndefined()
  })
})
