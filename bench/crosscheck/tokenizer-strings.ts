import fc from 'fast-check'

// Seeded test strings for the byte-level BPE reference checks: the categories issue 15 names
// (unicode and accents, CJK, emoji, whitespace runs, numbers of every length, contractions,
// code, URLs, special-token look-alikes), mixed and glued together so word boundaries move.

const FRAGMENTS = [
  'Hello',
  'world',
  ' the',
  'The',
  'café',
  'naïve',
  'résumé',
  'Ångström',
  'cafe\u0301', // e + combining acute: NFC changes it (Qwen normalises)
  'Straße',
  'ÆØÅ',
  'Ελληνικά',
  'Русский текст',
  'مرحبا',
  'שלום',
  'हिन्दी',
  '日本語のテキスト',
  '中文字符',
  '한국어',
  'ﾊﾝｶｸ',
  '😀',
  '👍🏽',
  '👨‍👩‍👧',
  '🇫🇷',
  '✓',
  '\u00a0',
  '\u3000',
  '\u2009',
  '\u0085',
  '\ufeff',
  '\u200b',
  "don't",
  "I'm",
  "we'll",
  "they've",
  "she'd",
  "it's",
  "IT'S",
  "'S",
  "O'Neil",
  'function f(x) { return x * 2; }',
  'if (a && b) {\n\tc();\n}',
  'const s = "a\\nb";',
  '<div class="x">',
  '#include <stdio.h>',
  'x += 1;',
  '==>',
  '...',
  '!!!',
  '?!',
  'https://example.com/path?q=1&r=two#frag',
  'user@example.org',
  'C:\\Windows\\system32',
  '<|eot_id|>',
  '<|begin_of_text|>',
  '<|start_header_id|>',
  '<|im_start|>',
  '<|im_end|>',
  '<|endoftext|>',
  '<think>',
  '</think>',
  '<tool_call>',
  '<|not_a_token|>',
  '<s>',
  '[INST]',
  '<|',
  '|>'
]

const WHITESPACE = [' ', '  ', '   ', '\n', '\n\n', '\r\n', '\t', '\t\t', ' \n ', '\n \n', '    ', '\r']

const number = fc.oneof(
  fc.integer({ min: 0, max: 9 }).map(String),
  fc.bigInt({ min: 0n, max: 10n ** 25n }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.stringMatching(/^[0-9]{1,14}$/)
)

const part = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...FRAGMENTS) },
  { weight: 3, arbitrary: fc.constantFrom(...WHITESPACE) },
  { weight: 2, arbitrary: number },
  { weight: 2, arbitrary: fc.string({ maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 4 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 4 }) }
)

const text = fc
  .array(part, { minLength: 0, maxLength: 12 })
  .chain((parts) =>
    fc
      .array(fc.constantFrom('', '', ' ', '\n'), { minLength: parts.length, maxLength: parts.length })
      .map((seps) => parts.map((p, i) => p + seps[i]).join(''))
  )

/** `count` strings from `seed`; the same seed gives the same strings. */
export function tokenizerStrings(count: number, seed: number): string[] {
  return fc.sample(text, { numRuns: count, seed })
}

/**
 * Fixed hard strings before the seeded ones: llama.cpp's own pre-tokenizer probe (chktxt of
 * convert_hf_to_gguf_update.py), long digit and whitespace runs, and chat-shaped text.
 */
export const HARD_STRINGS = [
  "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
  '12345678901234567890 0.000001 -42 1e10 ١٢٣',
  '          x\n\n\n\n\t\t\t   \r\n',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  '<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|eot_id|>',
  '<|im_start|<|im_end |> <|endoftext|><think>x</think>',
  'for (let i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}',
  'ÀÉÎÕÜ ǅ ﬁ ẞ İstanbul ΆΈΉ',
  '🏳️‍🌈👩🏽‍💻🇯🇵 漢字かなカナ한국어 ไทย'
]
