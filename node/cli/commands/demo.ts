import type { Command } from 'commander'
import { createClient } from '../../../client/index.js'
import { openModelFile } from '../../../shards/index.js'
import { defaultModelPath } from '../../paths.js'
import { BadOptionError } from '../errors.js'
import { type LocalNode, startLocalNode } from '../local-swarm.js'
import { int } from '../options.js'

/** A local swarm announces often, so the client finds every peer within a second. */
const FAST_ANNOUNCE = ['--announce-interval', '500']

/** The demo's three spans: the client keeps block 0 and block n-1; three peers split [1, n-1) as evenly as they can. */
export function demoSpans(nLayers: number): string[] {
  const cut = (i: number): number => 1 + Math.round(((nLayers - 2) * i) / 3)
  return [0, 1, 2].map((i) => `${cut(i)}:${cut(i + 1)}`)
}

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description(
      'Start a real local swarm (3 node processes on 127.0.0.1 serving a model, the bundled one by default), generate through it, show the route, stop everything.'
    )
    .option('--model <path>', 'model file (default: the bundled stories260K.gguf); needs at least 5 blocks')
    .option('--prompt <text>', 'the prompt', 'Once upon a time')
    .option('--max-tokens <n>', 'new tokens', int('--max-tokens', 1), 96)
    .option('--forwarding <mode>', 'relay or chain', 'chain')
    .action(async (opts) => {
      const model: string = opts.model ?? defaultModelPath()
      const file = openModelFile(model)
      const n = file.config.nLayers
      file.close()
      if (n < 5) throw new BadOptionError(`--model: the demo needs a model of at least 5 blocks, ${model} has ${n}`)
      const spans = demoSpans(n)
      const say = (s: string): void => {
        process.stderr.write(`${s}\n`)
      }
      const nodes: LocalNode[] = []
      try {
        say(
          `starting 3 peers on 127.0.0.1 (blocks ${spans.map((sp) => `[${sp.replace(':', ',')})`).join(', ')}; the client keeps block 0, block ${n - 1} and the head)`
        )
        nodes.push(await startLocalNode({ model, layers: spans[0], args: FAST_ANNOUNCE }))
        const bootstrap = [nodes[0].addrs[0]]
        nodes.push(
          ...(await Promise.all([
            startLocalNode({ model, layers: spans[1], bootstrap, args: FAST_ANNOUNCE }),
            startLocalNode({ model, layers: spans[2], bootstrap, args: FAST_ANNOUNCE })
          ]))
        )
        for (const n of nodes) say(`  peer ${n.peerId} serves [${n.layers[0]}, ${n.layers[1]}) at ${n.addrs[0]}`)
        const client = await createClient({ bootstrap, model, forwarding: opts.forwarding })
        try {
          say(`\ngenerating (${opts.forwarding} forwarding, greedy):\n`)
          const it = client.stream(opts.prompt, { maxTokens: opts.maxTokens, temperature: 0 })
          process.stdout.write(opts.prompt)
          let r = await it.next()
          let shown = ''
          while (!r.done) {
            const ev = r.value
            if (ev.type === 'rollback')
              process.stdout.write(`\n[rollback from token ${ev.position}, convicted: ${ev.convicted}]\n`)
            process.stdout.write(ev.text)
            shown = ev.type === 'rollback' ? shown.slice(0, ev.textOffset) + ev.text : shown + ev.text
            r = await it.next()
          }
          // the stream decoder holds back an unfinished UTF-8 sequence; the final text has it
          process.stdout.write(`${r.value.text.startsWith(shown) ? r.value.text.slice(shown.length) : ''}\n`)
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
