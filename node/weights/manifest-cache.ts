import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  buildWeightsManifest,
  type ManifestOptions,
  manifestFromJson,
  manifestToJson,
  type WeightsManifest
} from '../../shards/index.js'

/**
 * Issue 33: a whole file's manifest means hashing every byte once (about 10 s per GB here), so it
 * is kept in `<models>/manifests/`, keyed by the file's path, size and mtime: a node restarted on
 * the same file starts at once, and an edited file is hashed again.
 */
export async function fileManifest(
  path: string,
  legacyModelId: string,
  modelsDir: string,
  options: ManifestOptions = {}
): Promise<WeightsManifest> {
  const st = statSync(path)
  const key = createHash('sha256')
    .update(`${realpathSync(path)}\0${st.size}\0${st.mtimeMs}\0${legacyModelId}`)
    .digest('hex')
    .slice(0, 32)
  const dir = join(modelsDir, 'manifests')
  const cached = join(dir, `${key}.json`)
  if (existsSync(cached)) {
    try {
      return manifestFromJson(readFileSync(cached, 'utf8'))
    } catch {
      // a torn write: hash again
    }
  }
  const m = await buildWeightsManifest(path, legacyModelId, options)
  mkdirSync(dir, { recursive: true })
  writeFileSync(cached, manifestToJson(m))
  return m
}
