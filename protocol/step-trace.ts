/**
 * LAYERSWARM_STEP_TRACE=DIR: every process records wall-clock timestamps (µs, comparable
 * across processes on one host) of its session-stream events and writes them to
 * DIR/<pid>.jsonl on exit. For finding where a step's round trip goes (bench/hop.ts);
 * off (one property check per event) unless set.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

const dir = process.env.LAYERSWARM_STEP_TRACE
const events: string[] = []
if (dir) process.on('exit', () => writeFileSync(join(dir, `${process.pid}.jsonl`), events.join('\n')))

export const stepTraceOn = dir !== undefined && dir !== ''

export function stepTrace(event: string, id: number | string): void {
  if (!stepTraceOn) return
  events.push(JSON.stringify({ pid: process.pid, t: Math.round((performance.timeOrigin + performance.now()) * 1000), event, id }))
}
