import { chmodSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CanaryArgumentError, createDetector, type DetectorRecord, defaultBenignModel } from '../../canary/index.js'
import { detectorFingerprint, InvalidTrustFileError, loadTrust, saveTrust, TrustFileExposedError } from '../../client/index.js'
import { restoreTrustFile } from '../../client/verification/trust-file.js'

const benign = defaultBenignModel()
const drift = (rel: number) => ({ relL2: rel, cosine: (rel * rel) / 2, maxAbs: rel })

describe('detector records', () => {
  it('restore() takes back exactly what records() gave, and keeps evidence a peer already has', () => {
    const a = createDetector({ benign })
    for (let i = 0; i < 5; i++) a.observe('honest', drift(1e-3), 'f32', 40)
    for (let i = 0; i < 3; i++) a.observe('tamperer', drift(0.5), 'f32', 40)
    const b = createDetector({ benign })
    b.observe('honest', drift(1e-3), 'f32', 40)
    b.restore(a.records())
    expect(b.verdict('tamperer')).toEqual(a.verdict('tamperer'))
    expect(b.excluded()).toEqual(['tamperer'])
    expect(b.verdict('honest').observations).toBe(1) // its own evidence stays
    // and evidence goes on from the restored sums
    const c = createDetector({ benign })
    c.restore(a.records())
    a.observe('honest', drift(2e-3), 'f32', 90)
    c.observe('honest', drift(2e-3), 'f32', 90)
    expect(c.verdict('honest')).toEqual(a.verdict('honest'))
  })

  it('refuses a malformed record and restores none of the batch', () => {
    const good: DetectorRecord = { peerId: 'p', sums: [0, 0, 0, 0, 0, 0], observations: 1, maxDensityRatio: 0, excluded: false }
    for (const bad of [
      { ...good, sums: [0, 0] },
      { ...good, sums: [0, 0, 0, 0, 0, Number.NaN] },
      { ...good, observations: -1 },
      { ...good, peerId: '' },
      { ...good, excluded: 'no' }
    ]) {
      const d = createDetector({ benign })
      expect(() => d.restore([good, bad as DetectorRecord])).toThrow(CanaryArgumentError)
      expect(d.records()).toEqual([])
    }
  })
})

describe('trust file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'layerswarm-trust-unit-'))
  const det = createDetector({ benign })
  det.observe('peer', drift(1e-3), 'f32', 40)
  const fp = detectorFingerprint(benign, det)

  it('keeps records per model id, owner-only, and gives none to another detector', () => {
    const path = join(dir, 'nested', 'trust.json')
    expect(loadTrust(path, 'm1', fp)).toEqual([]) // no file yet
    saveTrust(path, 'm1', fp, det.records())
    saveTrust(path, 'm2', fp, [])
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(loadTrust(path, 'm1', fp)).toEqual(det.records())
    expect(loadTrust(path, 'm2', fp)).toEqual([])
    const strict = createDetector({ benign, bound: 0.999 })
    expect(loadTrust(path, 'm1', detectorFingerprint(benign, strict))).toEqual([])
  })

  it('writes through an unpredictable, exclusively created temporary file and never through a planted symlink', () => {
    const d = mkdtempSync(join(tmpdir(), 'trust-link-'))
    const path = join(d, 'trust.json')
    const victim = join(d, 'victim.txt')
    writeFileSync(victim, 'untouched')
    // the old temporary name (pid-based) planted as a symlink to a file the attacker wants overwritten
    symlinkSync(victim, `${path}.${process.pid}.tmp`)
    saveTrust(path, 'm1', fp, det.records())
    expect(readFileSync(victim, 'utf8')).toBe('untouched')
    expect(loadTrust(path, 'm1', fp)).toEqual(det.records())
    expect(readdirSync(d).filter((n) => n.endsWith('.tmp') && !n.includes(String(process.pid)))).toEqual([])
  })

  it('refuses a file that is not a trust file with a typed error', () => {
    const path = join(dir, 'bad.json')
    for (const text of ['not json', '{"version":2,"models":{}}', '[]']) {
      writeFileSync(path, text, { mode: 0o600 })
      chmodSync(path, 0o600)
      expect(() => loadTrust(path, 'm1', fp)).toThrow(InvalidTrustFileError)
      expect(readFileSync(path, 'utf8')).toBe(text)
    }
  })

  // issue #39: read like the identity file (node/identity.ts): no symlinks, owner-only
  it('refuses a symlink at the trust file and never reads or writes its target', () => {
    const d = mkdtempSync(join(tmpdir(), 'trust-nofollow-'))
    const real = join(d, 'elsewhere.json')
    saveTrust(real, 'm1', fp, det.records())
    const before = readFileSync(real, 'utf8')
    const path = join(d, 'trust.json')
    symlinkSync(real, path)
    expect(() => loadTrust(path, 'm1', fp)).toThrow(TrustFileExposedError)
    expect(() => saveTrust(path, 'm1', fp, [])).toThrow(TrustFileExposedError)
    expect(readFileSync(real, 'utf8')).toBe(before)
  })

  it('refuses a trust file group or others may read or write, with a coded error, and leaves it alone', () => {
    const d = mkdtempSync(join(tmpdir(), 'trust-mode-'))
    const path = join(d, 'trust.json')
    saveTrust(path, 'm1', fp, det.records())
    for (const mode of [0o666, 0o620, 0o604, 0o640]) {
      chmodSync(path, mode)
      const before = readFileSync(path, 'utf8')
      let err: unknown
      try {
        loadTrust(path, 'm1', fp)
      } catch (e) {
        err = e
      }
      expect(err).toBeInstanceOf(TrustFileExposedError)
      expect((err as TrustFileExposedError).code).toBe('TRUST_FILE_EXPOSED')
      // the client logs it and starts afresh; the file is not overwritten
      const events: Record<string, unknown>[] = []
      expect(restoreTrustFile(path, 'm1', benign, createDetector({ benign }), (e) => events.push(e))).toBeUndefined()
      expect(events[0]).toMatchObject({ event: 'trust-file-ignored', code: 'TRUST_FILE_EXPOSED' })
      expect(() => saveTrust(path, 'm1', fp, [])).toThrow(TrustFileExposedError)
      expect(readFileSync(path, 'utf8')).toBe(before)
    }
    chmodSync(path, 0o600)
    expect(loadTrust(path, 'm1', fp)).toEqual(det.records())
  })
})
