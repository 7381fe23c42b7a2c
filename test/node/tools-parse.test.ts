import { describe, expect, it } from 'vitest'
import { parseToolCalls } from '../../node/gateway/tools-format.js'

// Issue 37: tool calls parsed back from the model's text. Llama 3.1 separates parallel calls with
// `;`, which an argument string may also hold (a constrained call on a random model wrote one).

describe('parseToolCalls', () => {
  it('llama3: a `;` inside an argument does not split the call', () => {
    const text = '{"name": "get_weather", "parameters": {"city":"a;b","unit":"f"}}'
    const { content, calls } = parseToolCalls('llama3', text)
    expect(content).toBeNull()
    expect(calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['get_weather', { city: 'a;b', unit: 'f' }]])
  })

  it('llama3: parallel calls split at top-level `;` and new lines', () => {
    const text =
      '<|python_tag|>{"name": "f", "parameters": {"x": "1;2"}}; {"name": "g", "parameters": {}}\n{"name": "h", "parameters": {"s": "}"}}'
    const { calls } = parseToolCalls('llama3', text)
    expect(calls.map((c) => c.name)).toEqual(['f', 'g', 'h'])
    expect(JSON.parse(calls[2].arguments)).toEqual({ s: '}' })
  })

  it('llama3: text that is not a call stays content', () => {
    const { content, calls } = parseToolCalls('llama3', 'It is sunny; {not json}')
    expect(calls).toEqual([])
    expect(content).toBe('It is sunny; {not json}')
  })
})
