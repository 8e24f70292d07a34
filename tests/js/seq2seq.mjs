// transformers.js's encoder-decoders over an export folder (`onnx/encoder_model.onnx` and
// `onnx/decoder_model_merged.onnx`), for tests/python/clients.py.
//
// usage: node seq2seq.mjs EXPORT_DIR REQUESTS.json
// REQUESTS is a list of {input_ids, attention_mask, new_tokens} (a text encoder's rows, padded)
// or {input_features: {shape, data}, new_tokens} (speech); prints one JSON list: each request's
// generated ids per row (the decoder start token first), greedy, no EOS stop.
import { AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq, Tensor, env } from "@huggingface/transformers";
import { readFileSync } from "node:fs";
import path from "node:path";

const [exportDir, requestsFile] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(exportDir)) + path.sep;
const requests = JSON.parse(readFileSync(requestsFile, "utf8"));
const speech = requests.some((r) => r.input_features);
const Model = speech ? AutoModelForSpeechSeq2Seq : AutoModelForSeq2SeqLM;
const model = await Model.from_pretrained(path.basename(exportDir), { dtype: "fp32", device: "cpu" });

const int64 = (rows) => new Tensor("int64", BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);
const results = [];
for (const r of requests) {
  const inputs = speech
    ? { input_features: new Tensor("float32", Float32Array.from(r.input_features.data), r.input_features.shape) }
    : { input_ids: int64(r.input_ids), attention_mask: int64(r.attention_mask) };
  const out = await model.generate({ ...inputs, max_new_tokens: r.new_tokens, do_sample: false, ...(r.generate ?? {}) });
  results.push(out.tolist().map((row) => row.map(Number)));
}
console.log(JSON.stringify(results));
