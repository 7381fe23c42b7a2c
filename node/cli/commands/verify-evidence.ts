import { readFileSync } from 'node:fs'
import type { Command } from 'commander'
import { verifyEvidence } from '../../../client/verification/evidence.js'
import { openModelFile } from '../../../shards/index.js'

/**
 * `layerswarm verify-evidence FILE [--model F]`: a third party checks the convictions in a
 * `generate --json` result or a gateway response (docs/verification.md). Exit code 0 only when
 * every signature and hash holds (and, with the model, every recomputed drift is tampering).
 */
export function registerVerifyEvidence(program: Command): void {
  program
    .command('verify-evidence')
    .description(
      "Check a report's conviction evidence: receipt signatures, hash chains, and with --model the recomputed step and drift."
    )
    .argument('<file>', 'a `generate --json` result, a gateway response, or a verification report (JSON)')
    .option('--model <path>', 'the model file: recompute each convicting step and its drift')
    .option('--json', 'print the checks as JSON', false)
    .action(async (file: string, opts: { model?: string; json: boolean }) => {
      const json = JSON.parse(readFileSync(file, 'utf8'))
      const model = opts.model ? openModelFile(opts.model) : undefined
      try {
        const report = await verifyEvidence(json, model)
        if (opts.json) process.stdout.write(`${JSON.stringify(report)}\n`)
        else {
          for (const c of report.canaries) {
            const r = c.recomputed
            process.stdout.write(
              `canary conviction of ${c.peerId} (session ${c.sessionId}, step ${c.stepId}): signature ${ok(c.signature)}, span ${ok(c.span)}, input hash ${ok(c.inputHash)}, output hash ${ok(c.outputHash)}` +
                (r
                  ? `; recomputed: model ${ok(r.modelId)}, relative L2 drift ${r.drift.relL2.toExponential(3)}, density ratio ${r.densityRatio.toExponential(3)} (${r.tampered ? 'tampered' : 'within benign drift'})`
                  : '') +
                '\n'
            )
          }
          for (const r of report.replays) process.stdout.write(`replay conviction of ${r.peerId}: ${ok(r.valid)}\n`)
          process.stdout.write(report.ok ? 'evidence holds\n' : 'evidence does NOT hold\n')
        }
        if (!report.ok) process.exitCode = 2
      } finally {
        model?.close()
      }
    })
}

const ok = (v: boolean | string): string => (v === true ? 'ok' : v === false ? 'FAILED' : v)
