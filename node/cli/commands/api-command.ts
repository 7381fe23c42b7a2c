import { type Command, Option } from 'commander'
import { DEFAULT_CANARY_RATE } from '../../../canary/index.js'
import { DEFAULT_SPECULATE, WIRE_CLI_CHOICES } from '../../../client/index.js'
import { withConfig } from '../../config.js'
import { addLogLevelOption, createLogger } from '../../log.js'
import {
  DEFAULT_GATEWAY_LISTEN,
  DEFAULT_GATEWAY_MAX_CONCURRENT,
  DEFAULT_GATEWAY_MAX_CONNECTIONS,
  DEFAULT_GATEWAY_MAX_CONNECTIONS_PER_IP,
  DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS,
  DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS
} from '../../options.js'
import { warn } from '../cli-exit.js'
import { headOption } from '../head-options.js'
import { float, int, SPECULATE_HELP, speculateOption } from '../options.js'
import { addSeedOptions } from '../seed-options.js'
import { addCanaryBankOptions } from '../verification-options.js'
import { type ApiOptions, type RunningApi, runApi } from './api.js'
import { runModelsApi } from './api-models.js'

// `layerswarm api`: its options and the process around runApi (api.ts).

export function registerApi(program: Command): void {
  const cmd = program
    .command('api')
    .description(
      'OpenAI-compatible HTTP gateway to the swarm (/v1/models, /v1/completions, /v1/chat/completions) with a live status page at /. ' +
        'Prints one JSON line {url, model, metrics} once listening.'
    )
    .option('--bootstrap <addrs>', 'comma-separated multiaddrs (with /p2p/<peer id>) of swarm peers (required)')
    .option(
      '--model <path...>',
      "model the swarm serves (GGUF or llama2.c .bin, hf://org/repo/file.gguf, org/repo:QUANT); repeat it for several models, each named by its file, the request's 'model' picks one; default: the bundled stories260K.gguf"
    )
    .option(
      '--model-id <id...>',
      "a content id (lsw1-…) instead of --model: the gateway fetches only what it runs (tokenizer, embeddings, edge blocks, head; the middle blocks too for canaries without --canary-bank) from the swarm, checked against the id, and serves it under that id as 'model'; repeat it, or mix it with --model, for several models"
    )
    .option('--models-dir <dir>', 'where --model-id keeps what it fetched (default: $LAYERSWARM_HOME/models)')
    .option(
      '--p2p-listen <multiaddr...>',
      "libp2p addresses the gateway's client listens on: with --model-id, peers fetch the chunks it fetched from there (one model only)"
    )
    .option('--tokenizer <path>', 'tokenizer for llama2.c .bin models')
    .option('--model-name <name>', "the id clients pass as 'model' (default: the model file's name without extension)")
    .option('--listen <host:port>', 'HTTP address; anything but loopback needs --api-key', DEFAULT_GATEWAY_LISTEN)
    .option('--api-key <key>', 'require "Authorization: Bearer KEY" on every API request (at least 8 characters)')
    .addOption(
      new Option('--max-concurrent <n>', 'generations at once; more get HTTP 429')
        .argParser(int('--max-concurrent', 1))
        .default(DEFAULT_GATEWAY_MAX_CONCURRENT)
    )
    .addOption(
      new Option(
        '--request-timeout <ms>',
        'a client must send each whole request (headers and body) within this, else 408 and the connection closes; answers being streamed are never cut'
      )
        .argParser(int('--request-timeout', 1))
        .default(DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS)
    )
    .addOption(
      new Option('--max-connections <n>', 'HTTP connections held at once; more are closed on arrival')
        .argParser(int('--max-connections', 1))
        .default(DEFAULT_GATEWAY_MAX_CONNECTIONS)
    )
    .addOption(
      new Option('--max-connections-per-ip <n>', 'HTTP connections one client address holds at once; more are closed on arrival')
        .argParser(int('--max-connections-per-ip', 1))
        .default(DEFAULT_GATEWAY_MAX_CONNECTIONS_PER_IP)
    )
    .addOption(
      new Option(
        '--max-model-downloads <n>',
        'downloads of /model.gguf (the browser chat) at once; more get HTTP 503 with Retry-After'
      )
        .argParser(int('--max-model-downloads', 1))
        .default(DEFAULT_GATEWAY_MAX_MODEL_DOWNLOADS)
    )
    .addOption(
      new Option('--edge-first <k>', 'blocks the gateway runs itself before the swarm')
        .argParser(int('--edge-first', 0))
        .default(1)
    )
    .addOption(
      new Option('--edge-last <j>', 'blocks the gateway runs itself after the swarm').argParser(int('--edge-last', 0)).default(1)
    )
    .addOption(headOption())
    .addOption(
      new Option('--forwarding <mode>', 'relay (gateway sends to each hop) or chain (hops forward)')
        .choices(['relay', 'chain'])
        .default('relay')
    )
    .addOption(new Option('--speculate <mode>', SPECULATE_HELP).argParser(speculateOption).default(DEFAULT_SPECULATE))
    .addOption(
      new Option(
        '--wire <dtype>',
        'activation dtype on the wire, per hop. auto: f16 where the hop accepts it (half the bytes of f32, same greedy tokens on the bundled model), else f32, else q8_0. f32/f16/q8_0 (GGUF Q8_0 blocks; int8 is a deprecated name for it): that dtype on every hop, routing around peers that do not accept it'
      )
        .choices([...WIRE_CLI_CHOICES])
        .default('auto')
    )
    .addOption(
      new Option(
        '--canary-rate <r>',
        'base fraction of steps followed by a canary check of each hop (new or suspect peers are checked more often); 0 = off'
      )
        .argParser(float('--canary-rate', 0, 1))
        .default(DEFAULT_CANARY_RATE)
    )
    .addOption(
      new Option('--route-timeout <ms>', 'how long a request waits for the swarm to cover the model')
        .argParser(int('--route-timeout', 0))
        .default(10_000)
    )
    .option(
      '--metrics <host:port>',
      'serve Prometheus metrics at http://HOST:PORT/metrics (a bare PORT binds 127.0.0.1; requests whose Host header names another site get 403)'
    )
    .option(
      '--browser-bootstrap <addrs>',
      'comma-separated ws multiaddrs (/ip4/…/tcp/N/ws/p2p/<id>) the browser chat page (/chat) dials; default: the /ws addresses of the peers the gateway knows'
    )
  addCanaryBankOptions(cmd)
  addSeedOptions(cmd)
  addLogLevelOption(cmd)
  withConfig(cmd, { required: ['bootstrap'] })
  cmd.action(async (opts: ApiOptions) => {
    const log = createLogger({ level: opts.logLevel, name: 'layerswarm-api' })
    // A libp2p stream torn down at a bad moment can reject where nobody listens; a gateway
    // serving many clients should log that, not exit.
    process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'))
    // issue 33 item 5: several --model, one address; the request's model picks the gateway
    // commander gives arrays for the variadic --model and --model-id
    const ids = [opts.modelId ?? []].flat()
    const models = [...[opts.model ?? []].flat(), ...ids]
    const many = models.length > 1 ? await runModelsApi(opts, models, runApi, log) : undefined
    const api =
      many ??
      (await runApi(
        ids.length === 1 ? { ...opts, model: undefined, modelId: ids[0] } : { ...opts, model: models[0], modelId: undefined },
        log
      ))
    for (const f of many ? many.apis.flatMap((a) => a.bootstrapFailed) : (api as RunningApi).bootstrapFailed) warn(f)
    const line = many
      ? { url: many.url, models: many.models }
      : {
          url: (api as RunningApi).gateway.url,
          model: (api as RunningApi).gateway.modelName,
          metrics: (api as RunningApi).metrics?.url ?? null,
          ...p2pLine(api as RunningApi)
        }
    process.stdout.write(`${JSON.stringify(line)}\n`)
    const sig = await new Promise<string>((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'))
      process.once('SIGTERM', () => resolve('SIGTERM'))
    })
    log.info('stopping')
    await api.close()
    // Ctrl-C ends with 130, as every command does (docs/cli.md); SIGTERM is a planned stop
    if (sig === 'SIGINT') process.exitCode = 130
  })
}

/** The gateway's libp2p peer and addresses (when it listens) and what it fetched by id (issue 33). */
function p2pLine(api: RunningApi): Record<string, unknown> {
  const c = api.gateway.client
  const addrs = c.host.getMultiaddrs().map((a) => a.toString())
  return {
    ...(addrs.length > 0 ? { peerId: c.host.peerId.toString(), addrs } : {}),
    ...(c.fetchedWeights ? { contentId: c.fetchedWeights.contentId, weights: c.fetchedWeights } : {})
  }
}
