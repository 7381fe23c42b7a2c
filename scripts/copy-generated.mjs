// tsc compiles .ts only: copy the generated wire code (protocol/generated/*.js and *.d.ts, made by
// `npm run gen:wire` and committed) to dist/ beside the modules that import it. Part of `npm run build`.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const from = join(root, 'protocol', 'generated')
const to = join(root, 'dist', 'protocol', 'generated')
mkdirSync(to, { recursive: true })
for (const name of readdirSync(from)) {
  if (name.endsWith('.js') || name.endsWith('.d.ts')) copyFileSync(join(from, name), join(to, name))
}
