// The ggml span backend (issue 32, docs/backends.md): the package, the runtime and the choice.
export * from './backend.js'
export * from './device-fit.js'
export * from './package.js'
export * from './runtime.js'
