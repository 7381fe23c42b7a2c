import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

// Lists the exported async functions and methods of the library folders whose last parameter does
// not accept AbortOptions ({ signal?: AbortSignal }), the js-libp2p convention this project follows
// ("AbortOptions last on async calls"). "Async" means the declared return type is a Promise (or
// AsyncIterable), so a function that returns a promise without the `async` keyword counts too.

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const auditedFolders = ['node', 'protocol', 'client', 'shards', 'canary', 'crypto']

/** One finding: `file.ts: Owner.method` (or `file.ts: fn`). */
export interface AbortFinding {
  id: string
  reason: 'no-parameters' | 'last-parameter-not-abort-options'
}

function isAsyncReturn(type: ts.Type): boolean {
  const symbolName = (t: ts.Type): string | undefined => (t.getSymbol() ?? t.aliasSymbol)?.getName()
  const check = (t: ts.Type): boolean => {
    const name = symbolName(t)
    return name === 'Promise' || name === 'AsyncIterable' || name === 'AsyncGenerator' || name === 'AsyncIterableIterator'
  }
  if (type.isUnion()) return type.types.some(check)
  return check(type)
}

function acceptsAbortOptions(checker: ts.TypeChecker, param: ts.Symbol, at: ts.Node): boolean {
  const type = checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(param, at))
  const parts = type.isUnion() || type.isIntersection() ? [type, ...type.types] : [type]
  return parts.some((t) => {
    const signal = t.getProperty('signal') ?? checker.getApparentType(t).getProperty('signal')
    if (!signal) return false
    const signalType = checker.typeToString(checker.getTypeOfSymbolAtLocation(signal, at))
    return signalType.includes('AbortSignal')
  })
}

function checkSignatures(
  checker: ts.TypeChecker,
  id: string,
  type: ts.Type,
  at: ts.Node,
  findings: Map<string, AbortFinding>
): void {
  for (const sig of type.getCallSignatures()) {
    if (!isAsyncReturn(sig.getReturnType())) continue
    const params = sig.getParameters()
    const last = params[params.length - 1]
    let reason: AbortFinding['reason'] | undefined
    if (!last) reason = 'no-parameters'
    else if (!acceptsAbortOptions(checker, last, at)) reason = 'last-parameter-not-abort-options'
    // one overload that takes options is enough: the call can be made abortable
    if (reason === undefined) {
      findings.delete(id)
      return
    }
    findings.set(id, { id, reason })
  }
}

function isPublicMember(member: ts.ClassElement | ts.TypeElement): boolean {
  const flags = ts.getCombinedModifierFlags(member as unknown as ts.Declaration)
  if (flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) return false
  return !(member.name && ts.isPrivateIdentifier(member.name))
}

/** Every exported async function and public async method in the audited folders that lacks AbortOptions last. */
export function auditAbortOptions(): AbortFinding[] {
  const configPath = join(repoRoot, 'tsconfig.json')
  const config = ts.readConfigFile(configPath, ts.sys.readFile)
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, repoRoot)
  const program = ts.createProgram({ rootNames: parsed.fileNames, options: { ...parsed.options, noEmit: true } })
  const checker = program.getTypeChecker()
  const findings = new Map<string, AbortFinding>()
  for (const file of program.getSourceFiles()) {
    const rel = relative(repoRoot, file.fileName).replaceAll('\\', '/')
    if (file.isDeclarationFile || !auditedFolders.some((f) => rel.startsWith(`${f}/`))) continue
    const moduleSymbol = checker.getSymbolAtLocation(file)
    if (!moduleSymbol) continue
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      // re-exports (index.ts) are audited where they are declared
      if (exported.flags & ts.SymbolFlags.Alias) continue
      for (const decl of exported.getDeclarations() ?? []) {
        if (decl.getSourceFile() !== file) continue
        const name = exported.getName()
        if (ts.isFunctionDeclaration(decl) || ts.isVariableDeclaration(decl)) {
          checkSignatures(checker, `${rel}: ${name}`, checker.getTypeOfSymbolAtLocation(exported, decl), decl, findings)
        } else if (ts.isClassDeclaration(decl) || ts.isInterfaceDeclaration(decl)) {
          for (const member of decl.members as ts.NodeArray<ts.ClassElement | ts.TypeElement>) {
            const isMethod = ts.isMethodDeclaration(member) || ts.isMethodSignature(member)
            const isFnProperty = ts.isPropertySignature(member) || ts.isPropertyDeclaration(member)
            if ((!isMethod && !isFnProperty) || !member.name || !isPublicMember(member)) continue
            const memberSymbol = checker.getSymbolAtLocation(member.name)
            if (!memberSymbol) continue
            const isStatic =
              ts.isClassDeclaration(decl) && ts.getCombinedModifierFlags(member as ts.Declaration) & ts.ModifierFlags.Static
            const id = `${rel}: ${name}${isStatic ? '.' : '#'}${memberSymbol.getName()}`
            checkSignatures(checker, id, checker.getTypeOfSymbolAtLocation(memberSymbol, member), member, findings)
          }
        }
      }
    }
  }
  return [...findings.values()].sort((a, b) => a.id.localeCompare(b.id))
}
