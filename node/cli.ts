#!/usr/bin/env node
import '../protocol/polyfills.js'
import { exitWhenDrained, reportError } from './cli/cli-exit.js'
import { createProgram } from './cli/cli-program.js'

// `layerswarm … | head` closes the pipe early: that ends the output, it is not an error
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err
})

const program = createProgram()

try {
  await program.parseAsync(process.argv)
} catch (err) {
  reportError(err)
}
await exitWhenDrained()
