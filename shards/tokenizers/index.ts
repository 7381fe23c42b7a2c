// Tokenizers: SentencePiece/BPE, GPT-2 byte-level, special tokens, vocabulary packages.

export { SUPPORTED_PRE_TOKENIZERS } from './bpe-pretokenize.js'
export * from './tokenizer.js'
export * from './tokenizer-files.js'
export * from './tokenizer-special.js'
export { loadPackageVocabulary, VOCAB_PACKAGES, type VocabPackageName } from './vocab-packages.js'
