import { type Command, Option } from 'commander'
import { DEFAULT_CANARY_RATE } from '../../../../canary/index.js'
import { DEFAULT_SPECULATE, parseBootstrapList } from '../../../../client/index.js'
import { DEFAULT_KV_DTYPE, KV_DTYPES } from '../../../../shards/index.js'
import { jsonSafe } from '../../../gateway/report.js'
import { clientTrustFile } from '../../../identity.js'
import { defaultModelPath } from '../../../paths.js'
import { BadOptionError } from '../../errors.js'
import { headInit, headOption } from '../../head-options.js'
import { float, int, SPECULATE_HELP, speculateOption } from '../../options.js'
import { addSeedOptions, seedWeightsInit } from '../../seed-options.js'
import { addVerificationOptions, verificationOptions } from '../../verification-options.js'
import { checkReadableFile, resolveModelArgument } from '../checks.js'
import { readJsonSchema } from '../json-schema-option.js'
import { runLocalGenerate } from './generate.js'
import { runRemoteGenerate, WIRE_CLI_CHOICES } from './generate-remote.js'

/** `layerswarm generate`: local, or through a swarm with --bootstrap. */
export function registerGenerate(program: Command): void {
  addSeedOptions(addVerificationOptions(program.command('generate')))
    .description('Generate text from a prompt: locally (the whole model in this process), or through a swarm with --bootstrap.')
    .option('--model <path>', 'model file: GGUF, or llama2.c .bin (default: the bundled stories260K.gguf)')
    .option(
      '--tokenizer <path>',
      'tokenizer for llama2.c .bin models (default: tok<vocab>.bin or tokenizer.bin beside the model)'
    )
    .requiredOption('--prompt <text>', 'the prompt text')
    .addOption(
      new Option('--max-tokens <n>', 'new tokens to generate at most (stops earlier at EOS)')
        .argParser(int('--max-tokens', 0))
        .default(256)
    )
    .addOption(
      new Option('--temperature <t>', 'sampling temperature; 0 = greedy').argParser(float('--temperature', 0)).default(1)
    )
    .addOption(new Option('--top-k <k>', 'keep the k most likely tokens; 0 = off').argParser(int('--top-k', 0)).default(0))
    .addOption(new Option('--top-p <p>', 'nucleus sampling threshold; 1 = off').argParser(float('--top-p', 0, 1)).default(0.9))
    .addOption(new Option('--seed <s>', 'random seed (default: random, printed with --json)').argParser(int('--seed', 0)))
    .addOption(
      new Option('--repetition-penalty <r>', 'penalty ≥ 1 on log-probabilities of recent tokens; 1 = off')
        .argParser(float('--repetition-penalty', 1))
        .default(1)
    )
    .option(
      '--json-schema <file>',
      'constrain the output to JSON matching this JSON schema (constrained sampling, docs/gateway.md)'
    )
    .option('--json', 'print one JSON object instead of streaming text', false)
    .option('--chat', "wrap the prompt in the model's chat template (GGUF tokenizer.chat_template) as one user turn", false)
    .addOption(new Option('--threads <n>', 'kernel threads (default: all cores)').argParser(int('--threads', 1)))
    .addOption(new Option('--kernels <kind>', 'kernel set').choices(['auto', 'reference', 'wasm', 'native']).default('auto'))
    .addOption(
      new Option('--kv-dtype <dtype>', 'KV cache storage of the blocks run here (q8_0: GGUF Q8_0 blocks)')
        .choices([...KV_DTYPES])
        .default(DEFAULT_KV_DTYPE)
    )
    .option(
      '--model-id <id>',
      'with --bootstrap, instead of --model: fetch only what the client runs (tokenizer, embeddings, edge blocks, head; the middle blocks too for canaries without --canary-bank) from the swarm, checked against this content id (lsw1-…)'
    )
    .option('--models-dir <dir>', 'where --model-id keeps what it fetched (default: $LAYERSWARM_HOME/models)')
    .option('--bootstrap <addrs>', 'comma-separated multiaddrs of swarm peers: run the remote blocks on the swarm')
    .addOption(
      new Option('--edge-first <k>', 'with --bootstrap: blocks run locally before the swarm')
        .argParser(int('--edge-first', 0))
        .default(1)
    )
    .addOption(
      new Option('--edge-last <j>', 'with --bootstrap: blocks run locally after the swarm')
        .argParser(int('--edge-last', 0))
        .default(1)
    )
    .addOption(headOption())
    .addOption(
      new Option('--forwarding <mode>', 'with --bootstrap: relay (client sends to each hop) or chain (hops forward)')
        .choices(['relay', 'chain'])
        .default('relay')
    )
    .addOption(
      new Option(
        '--wire <dtype>',
        'with --bootstrap: activation dtype on the wire, per hop. auto: f16 where the hop accepts it (half the bytes of f32, same greedy tokens on the bundled model), else f32, else q8_0. f32/f16/q8_0 (GGUF Q8_0 blocks; int8 is a deprecated name for it): that dtype on every hop, routing around peers that do not accept it'
      )
        .choices([...WIRE_CLI_CHOICES])
        .default('auto')
    )
    .addOption(
      new Option(
        '--canary-rate <r>',
        'with --bootstrap: base fraction of steps followed by a canary check of each hop (new or suspect peers are checked more often); 0 = off'
      )
        .argParser(float('--canary-rate', 0, 1))
        .default(DEFAULT_CANARY_RATE)
    )
    .option(
      '--identity <file>',
      "with --bootstrap: keep this client's key here (made, mode 0600, on first use), so it is the same peer across runs; --trust-file then defaults to trust.json beside it"
    )
    .option(
      '--listen <multiaddr...>',
      'with --bootstrap: addresses the client listens on (a public one lets a node behind NAT, reached through a relay, dial back directly)'
    )
    .option('--announce <multiaddr...>', 'with --listen: the addresses to tell peers (a public address and port)')
    .option(
      '--trust-file <path>',
      "with --bootstrap: keep peers' canary records in this file across runs (a peer checked in an earlier run skips the new-peer burst of canaries; one convicted stays excluded)"
    )
    .addOption(
      new Option(
        '--snapshot-every <n>',
        'with --bootstrap: every n positions each hop seals a KV delta the client keeps (it cannot read it); a failover imports them and replays only the positions after; 0 = off'
      )
        .argParser(int('--snapshot-every', 0))
        .default(0)
    )
    .option(
      '--standby',
      'with --snapshot-every: per span, a standby peer not on the route imports every sealed delta and takes over when a hop dies',
      false
    )
    .addOption(
      new Option(
        '--kv-path <path>',
        'with --snapshot-every: node feeds standbys (else holder peers) node to node under grants the client signs; client keeps and forwards the sealed KV through this machine'
      )
        .choices(['node', 'client'])
        .default('node')
    )
    .addOption(
      new Option('--speculate <mode>', `with --bootstrap: ${SPECULATE_HELP}`)
        .argParser((v: string) => speculateOption(v))
        .default(DEFAULT_SPECULATE)
    )
    .option(
      '--verbose',
      'with --bootstrap: log routing and failover events to stderr, and explain a missing route (peers dialled, which answered, blocks missing)',
      false
    )
    .action(async (opts) => {
      if (opts.standby && !opts.snapshotEvery)
        throw new BadOptionError('--standby needs --snapshot-every <n> (the deltas it is fed with)')
      // every input checked before any work: one typed line instead of a trace from deep inside
      if (opts.modelId !== undefined && (opts.model !== undefined || opts.bootstrap === undefined))
        throw new BadOptionError('--model-id needs --bootstrap (the swarm it fetches from) and no --model')
      const model = opts.modelId !== undefined ? '' : await resolveModelArgument(opts.model ?? defaultModelPath(), '--model')
      if (opts.tokenizer !== undefined) checkReadableFile(opts.tokenizer, '--tokenizer')
      if (String(opts.speculate).startsWith('draft:')) checkReadableFile(String(opts.speculate).slice(6), '--speculate draft:')
      const bootstrap = opts.bootstrap !== undefined ? parseBootstrapList(String(opts.bootstrap)) : undefined
      // a kept identity keeps its trust records (and so the canary secret) beside it (docs/networking.md)
      if (opts.identity !== undefined && opts.trustFile === undefined) opts.trustFile = clientTrustFile(opts.identity)
      const ac = new AbortController()
      process.once('SIGINT', () => ac.abort())
      // What both paths share: the model, the prompt and the sampling.
      const common = {
        model,
        tokenizer: opts.tokenizer,
        prompt: opts.prompt,
        maxTokens: opts.maxTokens,
        temperature: opts.temperature,
        topK: opts.topK,
        topP: opts.topP === 0 ? 1 : opts.topP,
        seed: opts.seed ?? Math.floor(Math.random() * 2 ** 31),
        repetitionPenalty: opts.repetitionPenalty,
        json: opts.json,
        chat: opts.chat,
        ...(opts.jsonSchema !== undefined ? { schema: readJsonSchema(String(opts.jsonSchema)) } : {})
      }
      const write = (piece: string): void => {
        process.stdout.write(piece)
      }
      // Ctrl-C: what was streamed stays on stdout, ended with a newline; the status is 130 (cli-exit.ts)
      const ended = (err: unknown): never => {
        if (ac.signal.aborted && !opts.json) process.stdout.write('\n')
        throw err
      }
      const result = bootstrap
        ? await runRemoteGenerate(
            {
              ...common,
              bootstrap,
              modelId: opts.modelId,
              modelsDir: opts.modelsDir,
              seedWeights: seedWeightsInit(opts),
              identity: opts.identity,
              listen: opts.listen,
              announce: opts.announce,
              edgeFirst: opts.edgeFirst,
              ...headInit(opts.head, opts.edgeLast),
              forwarding: opts.forwarding,
              wire: opts.wire,
              canaryRate: opts.canaryRate,
              trustFile: opts.trustFile,
              snapshotEvery: opts.snapshotEvery,
              standby: opts.standby,
              kvPath: opts.kvPath,
              speculate: opts.speculate,
              verbose: opts.verbose,
              kvDType: opts.kvDtype,
              ...verificationOptions(opts),
              log: opts.verbose ? (e) => process.stderr.write(`${JSON.stringify(e)}\n`) : undefined
            },
            write,
            { signal: ac.signal }
          ).catch(ended)
        : await runLocalGenerate({ ...common, threads: opts.threads, kernelKind: opts.kernels, kvDType: opts.kvDtype }, write, {
            signal: ac.signal
          }).catch(ended)
      process.stdout.write(opts.json ? `${JSON.stringify(jsonSafe(result))}\n` : '\n')
    })
}
