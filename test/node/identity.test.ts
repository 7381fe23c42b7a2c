import { chmodSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  IdentityExistsError,
  IdentityFileExposedError,
  IdentityNotFoundError,
  InvalidIdentityFileError
} from '../../node/errors.js'
import { createIdentity, defaultIdentityPath, layerswarmHome, loadOrCreateIdentity, readIdentity } from '../../node/identity.js'

const scratch = () => mkdtempSync(join(tmpdir(), 'layerswarm-id-'))

describe('node identity files', () => {
  it('is made 0600 in a 0700 folder on first use, and read back as the same peer id', async () => {
    const dir = join(scratch(), 'home')
    const path = join(dir, 'identity.key')
    const made = await loadOrCreateIdentity(path)
    expect(made.created).toBe(true)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    const again = await loadOrCreateIdentity(path)
    expect(again.created).toBe(false)
    expect(again.peerId).toBe(made.peerId)
    expect(again.privateKey.equals(made.privateKey)).toBe(true)
  })

  it('refuses a file group or others may read or write', async () => {
    const path = join(scratch(), 'identity.key')
    await createIdentity(path)
    for (const mode of [0o640, 0o604, 0o620]) {
      chmodSync(path, mode)
      expect(() => readIdentity(path)).toThrow(IdentityFileExposedError)
    }
  })

  it('new keeps an existing key unless told to replace it', async () => {
    const path = join(scratch(), 'identity.key')
    const a = await createIdentity(path)
    await expect(createIdentity(path)).rejects.toThrow(IdentityExistsError)
    expect(readIdentity(path).peerId).toBe(a.peerId)
    const b = await createIdentity(path, { overwrite: true })
    expect(b.peerId).not.toBe(a.peerId)
    expect(readIdentity(path).peerId).toBe(b.peerId)
  })

  it('typed errors for a missing, empty, garbage or symlinked file', async () => {
    const dir = scratch()
    expect(() => readIdentity(join(dir, 'none.key'))).toThrow(IdentityNotFoundError)
    const empty = join(dir, 'empty.key')
    writeFileSync(empty, '', { mode: 0o600 })
    expect(() => readIdentity(empty)).toThrow(InvalidIdentityFileError)
    const junk = join(dir, 'junk.key')
    writeFileSync(junk, 'not a key at all', { mode: 0o600 })
    expect(() => readIdentity(junk)).toThrow(InvalidIdentityFileError)
    const real = join(dir, 'real.key')
    await createIdentity(real)
    const link = join(dir, 'link.key')
    symlinkSync(real, link)
    expect(() => readIdentity(link)).toThrow(InvalidIdentityFileError)
    expect(() => readIdentity(dir)).toThrow(InvalidIdentityFileError)
    expect(readFileSync(real).length).toBeGreaterThan(0)
  })

  it('the home folder comes from LAYERSWARM_HOME, else ~/.layerswarm', () => {
    expect(layerswarmHome({ LAYERSWARM_HOME: '/x/y' })).toBe('/x/y')
    expect(layerswarmHome({})).toMatch(/\.layerswarm$/)
    expect(defaultIdentityPath('node', { LAYERSWARM_HOME: '/x' })).toBe('/x/identity.key')
    expect(defaultIdentityPath('client', { LAYERSWARM_HOME: '/x' })).toBe('/x/client-identity.key')
  })
})
