// The public API of the package, read from its three entry points with the TypeScript compiler
// (issue 36 step 5), written as two committed files:
//   docs/api.md          the page a user reads: per entry point its example, then each name with
//                        its kind, its TSDoc summary and any @example
//   docs/api-report.md   API-extractor style: every exported name with its full signature, so a
//                        change to the public surface shows in review
// Usage: `npm run gen:api`, or `node scripts/gen-api.mjs <dir>` to write both into <dir>.
// test/house/public-api.test.ts regenerates them into a temp folder and fails when they differ.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const out = process.argv[2] ?? join(root, 'docs')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

/** package.json's exports, mapped back to the sources: `./client` -> client/public.ts. */
const ENTRIES = Object.entries(pkg.exports)
  .filter(([key]) => key !== './package.json')
  .map(([key, value]) => ({
    name: `layerswarm${key.slice(1)}`,
    file: join(root, value.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'))
  }))

const program = ts.createProgram(
  ENTRIES.map((e) => e.file),
  {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node']
  }
)
const checker = program.getTypeChecker()
const FORMAT =
  ts.TypeFormatFlags.NoTruncation |
  ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType |
  ts.TypeFormatFlags.WriteArrayAsGenericType

/** Machine paths never reach the committed files. */
const clean = (text) => text.replaceAll(`${root}/`, '').replace(/import\("[^"]*"\)\./g, '')

function kindOf(symbol) {
  const decl = symbol.declarations?.[0]
  if (decl === undefined) return 'unknown'
  if (ts.isFunctionDeclaration(decl)) return 'function'
  if (ts.isClassDeclaration(decl)) return 'class'
  if (ts.isInterfaceDeclaration(decl)) return 'interface'
  if (ts.isTypeAliasDeclaration(decl)) return 'type'
  if (ts.isEnumDeclaration(decl)) return 'enum'
  if (ts.isVariableDeclaration(decl)) return 'const'
  if (ts.isModuleDeclaration(decl)) return 'namespace'
  return ts.SyntaxKind[decl.kind]
}

/** Members a class inherits from the platform (Error's stack, captureStackTrace...) are not ours to list. */
const fromPlatform = (decl) =>
  program.isSourceFileDefaultLibrary(decl.getSourceFile()) || decl.getSourceFile().fileName.includes('/node_modules/')

function isPublicMember(member) {
  const decl = member.declarations?.[0]
  if (decl === undefined || fromPlatform(decl)) return false
  if (member.name.startsWith('#') || member.name.startsWith('__')) return false
  const flags = ts.getCombinedModifierFlags(decl)
  return (
    (flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0 && !(decl.name && ts.isPrivateIdentifier(decl.name))
  )
}

function memberLines(type, at, statics = false) {
  const lines = []
  for (const member of checker.getPropertiesOfType(type).filter(isPublicMember)) {
    const memberType = checker.getTypeOfSymbolAtLocation(member, at)
    const calls = memberType.getCallSignatures()
    const optional = member.flags & ts.SymbolFlags.Optional ? '?' : ''
    const prefix = statics ? 'static ' : ''
    const readonly = ts.getCombinedModifierFlags(member.declarations[0]) & ts.ModifierFlags.Readonly ? 'readonly ' : ''
    if (member.flags & ts.SymbolFlags.Method && calls.length > 0) {
      for (const sig of calls) lines.push(`  ${prefix}${member.name}${optional}${checker.signatureToString(sig, at, FORMAT)}`)
    } else lines.push(`  ${prefix}${readonly}${member.name}${optional}: ${checker.typeToString(memberType, at, FORMAT)}`)
  }
  return lines
}

/** One name's signature, API-extractor style. */
function signatureOf(name, symbol, at) {
  const kind = kindOf(symbol)
  const decl = symbol.declarations[0]
  switch (kind) {
    case 'function': {
      const type = checker.getTypeOfSymbolAtLocation(symbol, at)
      return type.getCallSignatures().map((s) => `function ${name}${checker.signatureToString(s, at, FORMAT)}`)
    }
    case 'class': {
      const instance = checker.getDeclaredTypeOfSymbol(symbol)
      const ctor = checker.getTypeOfSymbolAtLocation(symbol, at)
      const ctors = ctor
        .getConstructSignatures()
        .filter((s) => !s.declaration || isPublicMember({ name: 'constructor', declarations: [s.declaration] }))
        .map((s) => `  constructor${checker.signatureToString(s, at, FORMAT).replace(/: [^:]*$/, '')}`)
      const statics = memberLines(ctor, at, true).filter((l) => !l.startsWith('  static prototype'))
      const heritage = decl.heritageClauses?.map((h) => ` ${h.getText()}`).join('') ?? ''
      return [`class ${name}${heritage} {`, ...ctors, ...statics, ...memberLines(instance, at), '}']
    }
    case 'interface':
      return [`interface ${name} {`, ...memberLines(checker.getDeclaredTypeOfSymbol(symbol), at), '}']
    case 'type':
      return [
        `type ${name} = ${checker.typeToString(checker.getTypeAtLocation(decl.type), at, FORMAT | ts.TypeFormatFlags.InTypeAlias)}`
      ]
    case 'enum':
      return [`enum ${name}`]
    default:
      return [`${kind} ${name}: ${checker.typeToString(checker.getTypeOfSymbolAtLocation(symbol, at), at, FORMAT)}`]
  }
}

const docOf = (symbol) => ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim()
const examplesOf = (symbol) =>
  symbol
    .getJsDocTags(checker)
    .filter((t) => t.name === 'example')
    .map((t) => ts.displayPartsToString(t.text).trim())

/** The entry module's own TSDoc (its first comment, the @packageDocumentation). */
function moduleDoc(file) {
  const text = readFileSync(file, 'utf8')
  const m = text.match(/^\/\*\*([\s\S]*?)\*\//)
  if (m === null) return ''
  return m[1]
    .split('\n')
    .map((l) => l.replace(/^\s*\* ?/, ''))
    .filter((l) => !l.startsWith('@packageDocumentation'))
    .join('\n')
    .replace(/@example\n/, '\n')
    .trim()
}

const report = [
  '# layerswarm: API report',
  '',
  'GENERATED by `npm run gen:api` (scripts/gen-api.mjs) from the package entry points. Do not edit:',
  'a change here is a change to the public API; `test/house/public-api.test.ts` checks it is current.',
  ''
]
const page = [
  '# layerswarm: API',
  '',
  'GENERATED by `npm run gen:api` (scripts/gen-api.mjs) from the TSDoc of the package entry points;',
  'the full signatures are in [api-report.md](api-report.md). The package exports three entry points;',
  'everything else is internal and may change.',
  ''
]
let total = 0
for (const entry of ENTRIES) {
  const source = program.getSourceFile(entry.file)
  const moduleSymbol = checker.getSymbolAtLocation(source)
  const exports = checker.getExportsOfModule(moduleSymbol).sort((a, b) => a.name.localeCompare(b.name))
  total += exports.length
  report.push(`## ${entry.name} (${exports.length} names)`, '', '```ts')
  page.push(`## \`${entry.name}\``, '', moduleDoc(entry.file), '', '| name | kind | what |', '| --- | --- | --- |')
  const examples = []
  for (const alias of exports) {
    const symbol = alias.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(alias) : alias
    report.push(...signatureOf(alias.name, symbol, source).map(clean))
    const summary = docOf(symbol)
      .split('\n\n')[0]
      .replace(/\s*\n\s*/g, ' ')
      .replaceAll('|', '\\|')
    page.push(`| \`${alias.name}\` | ${kindOf(symbol)} | ${summary} |`)
    for (const ex of examplesOf(symbol)) examples.push(`### \`${alias.name}\``, '', ex, '')
  }
  report.push('```', '')
  page.push('', ...examples)
}
report.splice(5, 0, `${total} exported names in all.`, '')
mkdirSync(out, { recursive: true })
writeFileSync(join(out, 'api-report.md'), `${report.join('\n').trimEnd()}\n`)
writeFileSync(
  join(out, 'api.md'),
  `${page
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`
)
console.log(`gen:api: ${total} exported names (${out}/api.md, ${out}/api-report.md)`)
