#!/usr/bin/env node
import '../protocol/polyfills.js'
import { createProgram } from './cli-program.js'
import { exitWhenDrained, reportError } from './commands/cli-exit.js'

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
