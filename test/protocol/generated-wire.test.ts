/**
 * The wire code is generated from layerswarm.proto by protobufjs's CLI and committed (issue 36
 * step 4). This regenerates it into a temp folder and fails when the committed files differ, so a
 * .proto change without `npm run gen:wire` (or a hand edit of protocol/generated/) fails CI.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { DTYPE_VALUES } from '../../protocol/field-checks.js'
import { layerswarm } from '../../protocol/generated/layerswarm.js'
import { decodeTensorMessage, encodeTensorMessage } from '../../protocol/messages.js'

const committed = join(import.meta.dirname, '..', '..', 'protocol', 'generated')
const fresh = mkdtempSync(join(tmpdir(), 'layerswarm-wire-'))
afterAll(() => rmSync(fresh, { recursive: true, force: true }))

describe('generated wire code (npm run gen:wire)', () => {
  it('is what protobufjs-cli generates from protocol/layerswarm.proto now', () => {
    execFileSync(process.execPath, [join(import.meta.dirname, '..', '..', 'scripts', 'gen-wire.mjs'), fresh])
    const names = readdirSync(committed).sort()
    expect(readdirSync(fresh).sort()).toEqual(names)
    expect(names).toEqual(['layerswarm-scan.ts', 'layerswarm.d.ts', 'layerswarm.js'])
    for (const name of names) {
      const same = readFileSync(join(committed, name), 'utf8') === readFileSync(join(fresh, name), 'utf8')
      expect(same, `protocol/generated/${name} is stale: run npm run gen:wire and commit it`).toBe(true)
    }
  }, 60_000)

  it('is the code the codecs run: a tensor they encode is the generated class decoding', () => {
    const t = { shape: [2], dtype: 'f32' as const, data: new Uint8Array(8).fill(1) }
    const bytes = encodeTensorMessage(t)
    const generated = layerswarm.v1.Tensor.decode(bytes)
    expect(generated.shape).toEqual([2])
    expect(generated.dtype).toBe(DTYPE_VALUES.f32)
    expect(Array.from(layerswarm.v1.Tensor.encode(generated).finish())).toEqual(Array.from(bytes))
    expect(decodeTensorMessage(bytes)).toEqual(t)
  })
})
