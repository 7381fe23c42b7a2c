/** A layerswarm report as the gateway sends it (node/gateway/report.ts), the parts read here. */
export interface GatewayReport {
  readonly convicted?: string[]
  readonly report?: { routes?: { peerId: string }[][]; rollbacks?: unknown[] }
}

/**
 * What an SSE consumer of /v1/completions ends up with (docs/verification.md): the text chunks,
 * each `layerswarm` rollback event replacing the text from its offset on, and the final chunk's
 * report.
 */
export async function readSse(res: Response): Promise<{ text: string; rollbacks: number; layerswarm?: GatewayReport }> {
  const body = await res.text()
  let text = ''
  let rollbacks = 0
  let layerswarm: GatewayReport | undefined
  for (const event of body.split('\n\n')) {
    const data = event
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n')
    if (data === '' || data === '[DONE]') continue
    const chunk = JSON.parse(data) as {
      object?: string
      choices?: { text?: string }[]
      layerswarm?: GatewayReport & { offset?: number; text?: string }
    }
    if (chunk.object === 'layerswarm.rollback') {
      rollbacks++
      text = text.slice(0, chunk.layerswarm!.offset) + chunk.layerswarm!.text
      continue
    }
    text += chunk.choices?.[0]?.text ?? ''
    if (chunk.layerswarm?.report) layerswarm = chunk.layerswarm
  }
  return { text, rollbacks, layerswarm }
}
