import { describe, expect, it } from 'vitest'
import { createChatFormatter } from '../../node/gateway/chat-template.js'
import { parseToolCalls, renderWithTools, toolFamily, writeCall } from '../../node/gateway/tools/tools-format.js'

// Issue 37: Mistral's tool format through a Mistral-7B-Instruct-v0.3-style template (its
// tokenizer_config.json chat_template, as written here: the same structure, the same checks:
// alternating roles, 9-character tool call ids). OpenAI clients send ids like `call_…`, which
// that template refuses: the gateway maps them (mistralCallId) for the call and its result alike.
const MISTRAL_V03 = `{%- if messages[0]["role"] == "system" %}{%- set system_message = messages[0]["content"] %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}
{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}
{{- bos_token }}
{%- for message in loop_messages %}
{%- if message["role"] == "user" %}
{%- if tools is not none and (message == user_messages[-1]) %}{{- "[AVAILABLE_TOOLS] [" }}{%- for tool in tools %}{{- '{"type": "function", "function": ' + tool.function|tojson + '}' }}{%- if not loop.last %}{{- ", " }}{%- else %}{{- "]" }}{%- endif %}{%- endfor %}{{- "[/AVAILABLE_TOOLS]" }}{%- endif %}
{%- if loop.last and system_message is defined %}{{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}{%- else %}{{- "[INST] " + message["content"] + "[/INST]" }}{%- endif %}
{%- elif message.tool_calls is defined and message.tool_calls is not none %}{{- "[TOOL_CALLS] [" }}
{%- for tool_call in message.tool_calls %}{%- set out = tool_call.function|tojson %}{{- out[:-1] }}
{%- if not tool_call.id is defined or tool_call.id|length != 9 %}{{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{%- endif %}
{{- ', "id": "' + tool_call.id + '"}' }}{%- if not loop.last %}{{- ", " }}{%- else %}{{- "]" + eos_token }}{%- endif %}{%- endfor %}
{%- elif message["role"] == "assistant" %}{{- " " + message["content"]|trim + eos_token}}
{%- elif message["role"] == "tool_results" or message["role"] == "tool" %}{{- '[TOOL_RESULTS] {"content": ' + message.content|string + ", " }}
{%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}{{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{%- endif %}
{{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
{%- else %}{{- raise_exception("Only user and assistant roles are supported!") }}{%- endif %}
{%- endfor %}`

describe('Mistral v0.3 template with tools', () => {
  const chat = createChatFormatter({ template: MISTRAL_V03, bosToken: '<s>', eosToken: '</s>' })
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object' } } }]

  it('renders tools, an OpenAI-style call id and its result', () => {
    expect(toolFamily(chat)).toBe('mistral')
    const id = 'call_Zx9-Qa_71bKpLm2TtWw0Ab'
    const prompt = renderWithTools(
      chat,
      [
        { role: 'user', content: 'Weather in Paris?' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [{ id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]
        },
        { role: 'tool', content: '21 C', tool_call_id: id }
      ],
      tools
    )
    expect(prompt).toContain('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "m2TtWw0Ab"}]</s>')
    expect(prompt).toContain('[TOOL_RESULTS] {"content": 21 C, "call_id": "m2TtWw0Ab"}[/TOOL_RESULTS]')
    expect(prompt).toMatch(/^(<s>)?\[AVAILABLE_TOOLS\] \[\{"type": "function", "function": \{"name": "get_weather"/)
  })

  it('what the model is asked to write parses back', () => {
    const { calls } = parseToolCalls('mistral', writeCall('mistral', 'get_weather', { city: 'Oslo' }))
    expect(calls.map((c) => [c.name, c.arguments])).toEqual([['get_weather', '{"city":"Oslo"}']])
  })
})
