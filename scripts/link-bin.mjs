// Link the package's own bin into node_modules/.bin, so that in a clone `npx layerswarm …`
// runs this checkout's dist/ at once. Without it npx does not find the command locally and
// copies the whole repository into its cache, rebuilding it there (and later runs a stale copy).
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const binDir = join(root, 'node_modules', '.bin')
mkdirSync(binDir, { recursive: true })
for (const [name, target] of Object.entries(pkg.bin ?? {})) {
  const link = join(binDir, name)
  const file = join(root, target)
  if (!existsSync(file)) continue
  chmodSync(file, 0o755)
  try {
    if (lstatSync(link)) rmSync(link)
  } catch {}
  symlinkSync(relative(binDir, file), link)
}
