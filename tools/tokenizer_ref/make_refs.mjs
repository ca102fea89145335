// Writes the tokenizer.json test set and the ids two independent JavaScript
// implementations give for every corpus string. Run by
// scripts/fetch-tokenizer-refs.sh (test time only); read by
// tests/unit/tokenizer_json_test.cpp.
//
//   node make_refs.mjs --modules DIR/node_modules --corpus corpus.json --out DIR
//                      [--gpt2 DIR_WITH_encoder.json+vocab.bpe] [--tiny DIR_WITH_vocab.json+merges.txt]
//
// DIR/<name>/tokenizer.json   for name in llama3, qwen2, gpt2, gpt2-digits, tiny
// DIR/<name>/hf.json          [[ids...] per corpus string] from @huggingface/tokenizers
// DIR/llama3/llama3js.json    the same from llama3-tokenizer-js
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
for (const need of ["modules", "corpus", "out"]) {
  if (!args[need]) throw new Error(`make_refs: --${need} is required`);
}
const load = (pkg, file) => import(pathToFileURL(path.join(args.modules, pkg, file)).href);
const { Tokenizer } = await load("@huggingface/tokenizers", "dist/tokenizers.mjs");
const llama3 = (await load("llama3-tokenizer-js", "bundle/llama3-tokenizer-with-baked-data.js")).default;
const corpus = JSON.parse(fs.readFileSync(args.corpus, "utf8"));

// The split patterns as the models' own tokenizer.json files give them.
const LLAMA3_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2: Llama 3's, with single digits.
const QWEN2_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const byteLevel = (useRegex) => ({
  type: "ByteLevel",
  add_prefix_space: false,
  trim_offsets: true,
  use_regex: useRegex,
});
const splitThenBytes = (pattern) => ({
  type: "Sequence",
  pretokenizers: [
    { type: "Split", pattern: { Regex: pattern }, behavior: "Isolated", invert: false },
    byteLevel(false),
  ],
});
const added = (content, id) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: true,
});
const bosTemplate = (bos, id) => ({
  type: "Sequence",
  processors: [
    byteLevel(false),
    {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: bos, type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: bos, type_id: 1 } },
        { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: { [bos]: { id: bos, ids: [id], tokens: [bos] } },
    },
  ],
});
const tokenizerJson = ({ vocab, merges, addedTokens, preTokenizer, postProcessor, ignoreMerges }) => ({
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: addedTokens,
  normalizer: null,
  pre_tokenizer: preTokenizer,
  post_processor: postProcessor,
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: {
    type: "BPE",
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: ignoreMerges,
    vocab,
    merges,
  },
});

const write = (file, value) => {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(value));
};
const hfIds = (json) => {
  const tok = new Tokenizer(json, {});
  return corpus.map((text) => tok.encode(text).ids);
};

// --- Llama 3, from llama3-tokenizer-js's own vocabulary and merges ---
// vocabById holds the 128000 BPE tokens in GPT-2's byte alphabet, then the
// 256 special tokens; merges maps "left right" to its priority.
const nBpe = 128000;
const llamaVocab = {};
for (let id = 0; id < nBpe; ++id) llamaVocab[llama3.vocabById[id]] = id;
const llamaMerges = [...llama3.merges.entries()]
  .sort((a, b) => a[1] - b[1])
  .map(([key]) => key.split(" "));  // the [a, b] pair form
const llamaAdded = llama3.vocabById.slice(nBpe).map((t, k) => added(t, nBpe + k));
const llamaBase = {
  vocab: llamaVocab,
  merges: llamaMerges,
  addedTokens: llamaAdded,
  postProcessor: bosTemplate("<|begin_of_text|>", 128000),
  ignoreMerges: true,
};
const llamaJson = tokenizerJson({ ...llamaBase, preTokenizer: splitThenBytes(LLAMA3_PATTERN) });
write(path.join(args.out, "llama3/tokenizer.json"), llamaJson);
write(path.join(args.out, "llama3/hf.json"), hfIds(llamaJson));
write(
  path.join(args.out, "llama3/llama3js.json"),
  corpus.map((text) => llama3.encode(text, { bos: true, eos: false })),
);

// --- Qwen2's pattern over the same vocabulary ---
const qwenJson = tokenizerJson({ ...llamaBase, preTokenizer: splitThenBytes(QWEN2_PATTERN) });
write(path.join(args.out, "qwen2/tokenizer.json"), qwenJson);
write(path.join(args.out, "qwen2/hf.json"), hfIds(qwenJson));

// vocab.json-style vocabulary + merges.txt-style lines -> tokenizer.json parts.
const mergeLines = (text) =>
  text.split("\n").filter((line, i) => line.length > 0 && !(i === 0 && line.startsWith("#version")));

// --- GPT-2, from OpenAI's encoder.json + vocab.bpe ---
if (args.gpt2) {
  const vocab = JSON.parse(fs.readFileSync(path.join(args.gpt2, "encoder.json"), "utf8"));
  const merges = mergeLines(fs.readFileSync(path.join(args.gpt2, "vocab.bpe"), "utf8"));
  const json = tokenizerJson({
    vocab,
    merges,  // the "a b" string form
    addedTokens: [added("<|endoftext|>", vocab["<|endoftext|>"])],
    preTokenizer: byteLevel(true),
    postProcessor: byteLevel(true),
    ignoreMerges: false,
  });
  write(path.join(args.out, "gpt2/tokenizer.json"), json);
  write(path.join(args.out, "gpt2/hf.json"), hfIds(json));
  // SmolLM's pre-tokenizer shape: single digits first, then GPT-2's split.
  const digits = {
    ...json,
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [{ type: "Digits", individual_digits: true }, byteLevel(true)],
    },
  };
  write(path.join(args.out, "gpt2-digits/tokenizer.json"), digits);
  write(path.join(args.out, "gpt2-digits/hf.json"), hfIds(digits));
}

// --- the bundled tokenscope-tiny vocabulary with Llama 3's split ---
if (args.tiny) {
  const vocab = JSON.parse(fs.readFileSync(path.join(args.tiny, "vocab.json"), "utf8"));
  const merges = mergeLines(fs.readFileSync(path.join(args.tiny, "merges.txt"), "utf8"));
  const eot = vocab["<|endoftext|>"];
  const json = tokenizerJson({
    vocab,
    merges,
    addedTokens: eot === undefined ? [] : [added("<|endoftext|>", eot)],
    preTokenizer: splitThenBytes(LLAMA3_PATTERN),
    postProcessor: null,
    ignoreMerges: false,
  });
  write(path.join(args.out, "tiny/tokenizer.json"), json);
  write(path.join(args.out, "tiny/hf.json"), hfIds(json));
}
console.log(`tokenizer references for ${corpus.length} strings in ${args.out}`);
