import type { Command } from 'commander'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../local-swarm.js'
import { defaultModelPath } from '../paths.js'
import { int } from './options.js'

/** A local swarm announces often, so the client finds every peer within a second. */
const FAST_ANNOUNCE = ['--announce-interval', '500']

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description(
      'Start a real local swarm (3 node processes on 127.0.0.1 serving the bundled model), generate a story through it, show the route, stop everything.'
    )
    .option('--prompt <text>', 'the prompt', 'Once upon a time')
    .option('--max-tokens <n>', 'new tokens', int('--max-tokens', 1), 96)
    .option('--forwarding <mode>', 'relay or chain', 'chain')
    .action(async (opts) => {
      const model = defaultModelPath()
      const say = (s: string): void => {
        process.stderr.write(`${s}\n`)
      }
      const nodes: LocalNode[] = []
      try {
        say(
          'starting 3 peers on 127.0.0.1 (stories260K: blocks [1,2), [2,3), [3,4); the client keeps block 0, block 4 and the head)'
        )
        nodes.push(await startLocalNode({ model, layers: '1:2', args: FAST_ANNOUNCE }))
        const bootstrap = [nodes[0].addrs[0]]
        nodes.push(
          ...(await Promise.all([
            startLocalNode({ model, layers: '2:3', bootstrap, args: FAST_ANNOUNCE }),
            startLocalNode({ model, layers: '3:4', bootstrap, args: FAST_ANNOUNCE })
          ]))
        )
        for (const n of nodes) say(`  peer ${n.peerId} serves [${n.layers[0]}, ${n.layers[1]}) at ${n.addrs[0]}`)
        const client = await createClient({ bootstrap, model, forwarding: opts.forwarding })
        try {
          say(`\ngenerating (${opts.forwarding} forwarding, greedy):\n`)
          const it = client.stream(opts.prompt, { maxTokens: opts.maxTokens, temperature: 0 })
          process.stdout.write(opts.prompt)
          let r = await it.next()
          while (!r.done) {
            const ev = r.value
            if (ev.type === 'rollback')
              process.stdout.write(`\n[rollback from token ${ev.position}, convicted: ${ev.convicted}]\n`)
            process.stdout.write(ev.text)
            r = await it.next()
          }
          process.stdout.write('\n')
          say('\nroute:')
          for (const hop of r.value.report.routes.at(-1) ?? []) say(`  blocks [${hop.start}, ${hop.end}) on ${hop.peerId}`)
          say(`  client: blocks [${r.value.report.edge.first}), [${r.value.report.edge.last}), embeddings and head`)
        } finally {
          await client.close()
        }
      } finally {
        await Promise.all(nodes.map((n) => n.stop()))
        say('all peers stopped')
      }
    })
}
