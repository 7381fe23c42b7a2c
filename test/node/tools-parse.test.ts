import { describe, expect, it } from 'vitest'
import { parseToolCalls, toolFamily, writeCall } from '../../node/gateway/tools/tools-format.js'
import { ToolStream } from '../../node/gateway/tools/tools-stream.js'

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

// Mistral v0.3 / Nemo: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`, chosen from the
// template's control tokens (issue 37: "Mistral" among the families whose format is parsed).
const MISTRAL_TEMPLATE =
  "{%- for message in messages %}{%- if message['role'] == 'user' %}{%- if tools is not none %}[AVAILABLE_TOOLS] {{ tools|tojson }}[/AVAILABLE_TOOLS]{%- endif %}[INST] {{ message['content'] }}[/INST]{%- elif message.tool_calls is defined %}[TOOL_CALLS] [{{ message.tool_calls|tojson }}]{{ eos_token }}{%- endif %}{%- endfor %}"

describe('Mistral tool calls', () => {
  const formatter = { kind: 'template' as const, source: MISTRAL_TEMPLATE, stops: [], render: () => '' }

  it('the family comes from the template', () => {
    expect(toolFamily(formatter)).toBe('mistral')
  })

  it('parallel calls in one array, content before the marker kept', () => {
    const text = 'Let me look. [TOOL_CALLS] [{"name": "f", "arguments": {"x": "a]b"}}, {"name": "g", "arguments": {}}]'
    const { content, calls } = parseToolCalls('mistral', text)
    expect(content).toBe('Let me look.')
    expect(calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ['f', { x: 'a]b' }],
      ['g', {}]
    ])
  })

  it('a call alone has no content; a half call stays content', () => {
    expect(parseToolCalls('mistral', writeCall('mistral', 'get_weather', '{"city":"Paris"}'))).toMatchObject({
      content: null,
      calls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }]
    })
    const half = '[TOOL_CALLS] [{"name": "f", "argu'
    expect(parseToolCalls('mistral', half)).toEqual({ content: half, calls: [] })
    expect(parseToolCalls('mistral', 'no calls [TOOL')).toEqual({ content: 'no calls [TOOL', calls: [] })
  })

  it('streamed: content goes out until the marker (split across pieces), the calls at the end', () => {
    const s = new ToolStream('mistral')
    const pieces = ['Sure', '. [TOOL', '_CALLS] [{"name": "f", ', '"arguments": {"q": 1}}]']
    const outs = pieces.map((p) => s.push(p))
    expect(outs.map((o) => o.content)).toEqual(['Sure', '. ', '', ''])
    expect(outs.every((o) => o.calls.length === 0)).toBe(true)
    const end = s.flush()
    expect(end.calls.map((c) => [c.name, c.arguments])).toEqual([['f', '{"q":1}']])
    expect(end.content).toBe('')
  })

  it('streamed: a bracket that is not the marker is content', () => {
    const s = new ToolStream('mistral')
    expect(s.push('[1, 2] and [T').content).toBe('[1, 2] and ')
    expect(s.push('ea]').content).toBe('[Tea]')
    expect(s.flush()).toEqual({ content: '', calls: [] })
  })
})
