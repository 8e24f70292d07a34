// transformers.js's AutoModelForCausalLM over an export folder, for tests/python/clients.py.
//
// usage: node generate.mjs EXPORT_DIR REQUESTS.json [DTYPE]
// DTYPE is transformers.js's (default fp32: onnx/model.onnx; q4: onnx/model_q4.onnx, ...).
// REQUESTS is a list of {input_ids, attention_mask, new_tokens} (rows of ids, left-padded);
// prints one JSON list: each request's new tokens per row, greedy, no EOS stop.
import { AutoModelForCausalLM, Tensor, env } from "@huggingface/transformers";
import { readFileSync } from "node:fs";
import path from "node:path";

const [exportDir, requestsFile, dtype = "fp32"] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(exportDir)) + path.sep;
const model = await AutoModelForCausalLM.from_pretrained(path.basename(exportDir), { dtype, device: "cpu" });

const int64 = (rows) => new Tensor("int64", BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);
const results = [];
for (const r of JSON.parse(readFileSync(requestsFile, "utf8"))) {
  const n = r.input_ids[0].length;
  const out = await model.generate({
    input_ids: int64(r.input_ids),
    attention_mask: int64(r.attention_mask),
    max_new_tokens: r.new_tokens,
    do_sample: false,
    eos_token_id: -1,
    pad_token_id: 0,
  });
  results.push(out.tolist().map((row) => row.slice(n).map(Number)));
}
console.log(JSON.stringify(results));
