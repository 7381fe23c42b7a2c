// The layering of docs/design.md §1 as rules a tool enforces (issue 36 step 6). `npm run lint`
// runs them (`npm run lint:deps`); test/house/boundaries.test.ts plants violations in a temp tree
// and asserts each rule fails on them. Rules name top-level folders only, so they hold however a
// folder is organised inside (client/<room>/..., node/cli/..., shards/<concern>/...).
//
// CommonJS because dependency-cruiser loads its config with require (the package is type: module).

/** Our production folders. bench/ and test/ may import anything (design.md §1). */
const OURS = '(shards|crypto|protocol|canary|client|node)'

/**
 * Engine files protocol/ may import (design.md §1: the one edge between leaf folders): errors the
 * wire carries, the KV dtype a peer announces, and the one f16 conversion. Matched by file name in
 * any shards/ subfolder, so moving them inside shards/ keeps the rule.
 */
const PROTOCOL_ENGINE_LEAVES = '^shards/(|.*/)(errors|f16|kv-cache)\\.ts$'

/**
 * Imports across top-level folders that go to an inner file instead of `<folder>/index.ts`,
 * each with its reason. Keep this list short; prefer exporting the name from the index.
 */
const INNER_IMPORTS_ALLOWED = [
  // design.md §1: protocol re-exports the engine's session errors and uses its KV dtype and f16
  PROTOCOL_ENGINE_LEAVES,
  // a side-effect import that must be evaluated before libp2p loads (Promise.withResolvers on
  // Node 20); an entry point imports it first, ahead of any index that pulls libp2p in
  '^protocol/polyfills\\.ts$',
  // the ggml backend (issue 32) loads native libraries from disk: the CLI reaches it through its
  // own index, and shards/index.ts leaves it out so the browser bundle never pulls it in
  '^shards/ggml/index\\.ts$'
]

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment: 'A module must not import itself through others, type-only imports included (one reading order).',
      severity: 'error',
      from: { path: `^${OURS}/` },
      to: { circular: true }
    },
    {
      name: 'shards-imports-nothing-of-ours',
      comment: 'shards/ is pure compute on weight files (design.md §1).',
      severity: 'error',
      from: { path: '^shards/' },
      to: { path: '^(crypto|protocol|canary|client|node|bench|test|scripts)/' }
    },
    {
      name: 'crypto-imports-nothing-of-ours',
      comment: 'crypto/ is a leaf (design.md §1).',
      severity: 'error',
      from: { path: '^crypto/' },
      to: { path: '^(shards|protocol|canary|client|node|bench|test|scripts)/' }
    },
    {
      name: 'protocol-imports-only-engine-leaves',
      comment: 'protocol/ imports nothing of ours but shards/errors.ts, f16.ts and kv-cache.ts types (design.md §1).',
      severity: 'error',
      from: { path: '^protocol/' },
      to: { path: '^(shards|crypto|canary|client|node|bench|test|scripts)/', pathNot: PROTOCOL_ENGINE_LEAVES }
    },
    {
      name: 'canary-imports-shards-and-crypto',
      comment: 'canary/ may import shards/ and crypto/ only (design.md §1).',
      severity: 'error',
      from: { path: '^canary/' },
      to: { path: '^(protocol|client|node|bench|test|scripts)/' }
    },
    {
      name: 'client-is-below-node',
      comment: 'client/ (the SDK) never imports node/, bench/ or test/ (design.md §1).',
      severity: 'error',
      from: { path: '^client/' },
      to: { path: '^(node|bench|test|scripts)/' }
    },
    {
      name: 'daemon-never-imports-client',
      comment: 'The daemon never imports client/; the CLI commands and the gateway are clients (design.md §1).',
      severity: 'error',
      from: { path: '^node/', pathNot: '^node/(cli|gateway)/' },
      to: { path: '^client/' }
    },
    {
      name: 'production-never-imports-bench-or-test',
      comment: 'Test rigs and benchmarks wrap the product from outside (issue 36 step 2).',
      severity: 'error',
      from: { path: '^node/' },
      to: { path: '^(bench|test|scripts)/' }
    },
    {
      name: 'other-folders-through-index',
      comment:
        'Another top-level folder is imported through its index.ts, not its inner files (design.md §1); reasoned exceptions in INNER_IMPORTS_ALLOWED.',
      severity: 'error',
      from: { path: `^${OURS}/` },
      to: {
        path: `^${OURS}/`,
        pathNot: ['^$1/', `^${OURS}/index\\.ts$`, ...INNER_IMPORTS_ALLOWED]
      }
    }
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist|protocol/generated)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types']
    }
  }
}
