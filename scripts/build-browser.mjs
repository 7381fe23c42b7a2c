// Bundle the browser SDK (client/browser/worker-entry.ts) into dist/browser/layerswarm-worker.js,
// one ES module that `layerswarm api` serves to its chat page (node/gateway/browser-routes.ts).
// Vite (pinned in devDependencies; rolldown underneath) with the browser builds of libp2p's
// modules, and Node's built-ins mapped to client/browser/shims/. Nothing else reaches the bundle.
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
let build
try {
  ;({ build } = await import('vite'))
} catch {
  // a production install (no devDependencies) serves no chat page; the API works without it
  console.warn('build:browser: vite is not installed (devDependency); skipping the browser bundle')
  process.exit(0)
}
const shims = join(root, 'client', 'browser', 'shims')
const misc = join(shims, 'node-misc.ts')
const builtin = (name, file) => ({ find: new RegExp(`^(node:)?${name}$`), replacement: file })

await build({
  configFile: false,
  root,
  logLevel: 'warn',
  publicDir: false,
  resolve: {
    alias: [
      builtin('crypto', join(shims, 'node-crypto.ts')),
      builtin('fs', join(shims, 'node-fs.ts')),
      ...['path', 'url', 'os', 'events', 'module', 'worker_threads'].map((n) => builtin(n, misc))
    ]
  },
  define: {
    // our modules' free `Buffer` (shims/globals.ts says why not globalThis.Buffer)
    Buffer: 'globalThis.__layerswarmBuffer'
  },
  build: {
    outDir: join(root, 'dist', 'browser'),
    emptyOutDir: true,
    target: 'es2022',
    minify: true,
    sourcemap: false,
    reportCompressedSize: false,
    lib: {
      entry: join(root, 'client', 'browser', 'worker-entry.ts'),
      formats: ['es'],
      fileName: () => 'layerswarm-worker.js'
    }
  }
})
console.log('build:browser: dist/browser/layerswarm-worker.js')
