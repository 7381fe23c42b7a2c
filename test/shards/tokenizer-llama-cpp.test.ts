import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { tokenizerStrings } from '../../bench/crosscheck/tokenizer-strings.js'
import { LLAMA_CPP_VERSION, llamaCppDir } from '../../bench/llama-cpp.js'
import { parseShape, writeRandomModel } from '../../shards/formats/random-model.js'
import { openModelFile } from '../../shards/model/open-model.js'
import { createTokenizer } from '../../shards/tokenizers/tokenizer.js'
import { loadPackageVocabulary, type VocabPackageName } from '../../shards/tokenizers/vocab-packages.js'

// Opt-in (LAYERSWARM_LLAMA_CPP=1 with node-llama-cpp installed by `bench engine --compare
// llama-cpp`): llama.cpp's own tokenizer, reading the GGUF make-model --vocab writes, gives our
// tokens, on the strings as given: llama.cpp normalises no text (issue 31), although Qwen's
// tokenizer.json has an NFC normalizer (the strings include decomposed accents on purpose).

const dir = llamaCppDir()
const ENABLED =
  process.env.LAYERSWARM_LLAMA_CPP === '1' && existsSync(join(dir, 'node_modules', 'node-llama-cpp', 'package.json'))
const CHILD = `
import { getLlama, LlamaLogLevel } from 'node-llama-cpp'
import { readFileSync } from 'node:fs'
const [modelPath, stringsPath, special] = process.argv.slice(2)
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error })
const model = await llama.loadModel({ modelPath, gpuLayers: 0, vocabOnly: true })
const strings = JSON.parse(readFileSync(stringsPath, 'utf8'))
process.stdout.write(JSON.stringify(strings.map((s) => Array.from(model.tokenize(s, special === '1')))))
`
const work = mkdtempSync(join(tmpdir(), 'layerswarm-tok-llama-cpp-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

function llamaCppTokens(model: string, strings: string[], special: boolean): number[][] {
  const script = join(dir, 'layerswarm-tokenize.mjs')
  writeFileSync(script, CHILD)
  const input = join(work, 'strings.json')
  writeFileSync(input, JSON.stringify(strings))
  const r = spawnSync(process.execPath, [script, model, input, special ? '1' : '0'], {
    cwd: dir,
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    timeout: 300_000
  })
  if (r.status !== 0) throw new Error(`node-llama-cpp@${LLAMA_CPP_VERSION} failed: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

describe.skipIf(!ENABLED).each(['llama3', 'qwen'] as const)('tokenize equals llama.cpp on the %s vocabulary', (name) => {
  it('1,000 strings, with and without special tokens', () => {
    const v = loadPackageVocabulary(name as VocabPackageName)
    const path = join(work, `${name}.gguf`)
    const shape = { ...parseShape('64,1,4,2,64,300,tied'), vocabSize: v.tokens.length }
    writeRandomModel(path, shape, { dtype: 'f16', seed: 1, tokenizerMetadata: v.metadata })
    const m = openModelFile(path)
    const tok = createTokenizer(m.vocabulary!)
    m.close()
    const strings = tokenizerStrings(1000, 11)
    for (const special of [true, false]) {
      const want = llamaCppTokens(path, strings, special)
      const bad = strings.filter((s, i) => JSON.stringify(tok.encode(s, { bos: false, special })) !== JSON.stringify(want[i]))
      expect(bad.slice(0, 5)).toEqual([])
    }
  }, 600_000)
})
