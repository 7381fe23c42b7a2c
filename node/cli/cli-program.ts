import { Command } from 'commander'
import { withConfigEverywhere } from '../config.js'
import { registerApi } from './commands/api-command.js'
import { registerBackend } from './commands/backend.js'
import { registerCanary } from './commands/canary.js'
import { registerDemo } from './commands/demo.js'
import { registerDoctor } from './commands/doctor.js'
import { registerGenerate } from './commands/generate/generate-command.js'
import { registerIdentity } from './commands/identity.js'
import { registerInspect } from './commands/inspect.js'
import { registerJoin } from './commands/join.js'
import { registerMakeModel } from './commands/make-model.js'
import { registerNodeServe } from './commands/node/node-serve.js'
import { registerNodeStart } from './commands/node/node-start.js'
import { addPrivateSwarmOptions, registerPrivateSwarm } from './commands/private-swarm.js'
import { registerSwarm } from './commands/swarm.js'
import { registerTokenize } from './commands/tokenize.js'
import { registerVerifyEvidence } from './commands/verify-evidence.js'

/**
 * The whole command tree, built without parsing or running anything: cli.ts runs it, and
 * test/docs checks docs/cli.md against its options and defaults (issue 31).
 */
export function createProgram(): Command {
  const program = new Command()
  program
    .name('layerswarm')
    .description('Peer-to-peer LLM inference: run blocks of a model across libp2p peers, verified by canaries.')
    .version('0.1.0')
    // Errors become one line with a code (cli-exit.ts), not commander's message plus the help page;
    // subcommands inherit both settings, so these come before the commands.
    .exitOverride()
    .configureOutput({ outputError: () => {} })

  // one line per command
  registerGenerate(program)
  registerMakeModel(program)
  registerNodeStart(program)
  registerNodeServe(program)
  registerSwarm(program)
  registerDemo(program)
  registerApi(program)
  registerDoctor(program)
  registerTokenize(program)
  registerInspect(program)
  registerVerifyEvidence(program)
  registerCanary(program)
  registerIdentity(program)
  registerJoin(program)
  registerPrivateSwarm(program)
  registerBackend(program)
  withConfigEverywhere(program)
  // after the config hooks: its own hook reads the options the environment and file filled
  addPrivateSwarmOptions(program)
  return program
}
