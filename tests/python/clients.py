"""The client libraries users already run, over hfexport's folders as they are (tests/clients.rs).

Runs in the clients' own venv (`.venv/clients/`, versions.toml [clients]: optimum-onnx needs
transformers < 4.58), never in the oracle's.

  clients.py make OUT        sentence-transformers checkpoints made by the client's own
                             sentence-transformers (random encoders, pooling modes, Dense
                             modules, Normalize), encoder-decoders optimum can size, and
                             OUT/index.json
  clients.py check PLAN      loads each export of PLAN (a JSON list of cases) in its client and
                             prints one JSON line per check: {"case", "client", "worst"} or
                             {"case", "client", "error"}

The references are the clients' own: `SentenceTransformer(checkpoint)` for an exported
sentence-transformers folder (the same library, its torch backend), transformers' goldens of
the committed fixtures (golden.safetensors) for optimum's model classes, the oracle venv's
transformers' `generate` for the causal-LM batches and beams and the encoder-decoders
(tests/python/batched_generation.py).
"""

import json
import random
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import torch

# texts over the random tokenizers' words (w0 ... wN); different lengths, so batches are padded
TEXTS = ["w1 w2 w3", "w4 w5 w6 w7 w8 w9 w10 w11 w12", "w13", "w2 w14 w3 w15 w16"]

# the random sentence-transformers folders: (encoder, pooling modes, Dense activations (None:
# no bias), Normalize); fastembed pools cls, mean and lasttoken itself, the rest through the
# export's `sentence_embedding`
FOLDERS = [
    ("bert", ["mean"], [], True),
    ("roberta", ["cls"], [torch.nn.Tanh], True),
    ("distilbert", ["max", "mean"], [torch.nn.GELU, None], False),
    ("mpnet", ["lasttoken"], [], False),
    ("bert", ["weightedmean"], [torch.nn.ReLU], True),
]


def make(out):
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    out.mkdir(parents=True, exist_ok=True)
    cases = []
    for i, (kind, modes, dense, normalize) in enumerate(FOLDERS):
        rng = random.Random(1000 + i)
        torch.manual_seed(1000 + i)
        heads = rng.choice([2, 4])
        hidden = heads * rng.choice([4, 8])
        vocab = 40
        common = dict(vocab_size=vocab, max_position_embeddings=64)
        config = {
            "bert": lambda: transformers.BertConfig(hidden_size=hidden, num_attention_heads=heads, intermediate_size=2 * hidden,
                                                    num_hidden_layers=rng.choice([1, 2]), **common),
            "roberta": lambda: transformers.RobertaConfig(hidden_size=hidden, num_attention_heads=heads, pad_token_id=1,
                                                          intermediate_size=2 * hidden, num_hidden_layers=2, type_vocab_size=1,
                                                          **common),
            "distilbert": lambda: transformers.DistilBertConfig(dim=hidden, n_heads=heads, hidden_dim=2 * hidden, n_layers=2,
                                                                **common),
            "mpnet": lambda: transformers.MPNetConfig(hidden_size=hidden, num_attention_heads=heads, intermediate_size=2 * hidden,
                                                      num_hidden_layers=2, **common),
        }[kind]()
        folder = out / f"st{i}_{kind}"
        transformers.AutoModel.from_config(config).eval().save_pretrained(folder)
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{j}" for j in range(vocab)]
        (folder / "vocab.txt").write_text("\n".join(words[:vocab]) + "\n")
        # DistilBERT and MPNet take no token types
        names = ["input_ids", "attention_mask"] + (["token_type_ids"] if kind == "bert" else [])
        transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), model_input_names=names).save_pretrained(folder)
        modules = [Transformer(str(folder)), Pooling(hidden, pooling_mode=modes[0] if len(modes) == 1 else tuple(modes))]
        width, described = hidden * len(modes), []
        for act in dense:
            width_out = rng.randint(4, 24)
            function = (act or torch.nn.Identity)()
            modules.append(Dense(width, width_out, bias=act is not None, activation_function=function))
            described.append(f"{type(function).__name__} {width}->{width_out}{'' if act else ' no bias'}")
            width = width_out
        if normalize:
            modules.append(Normalize())
        SentenceTransformer(modules=modules, device="cpu").save(str(folder))
        cases.append({"name": folder.name, "dir": str(folder), "pooling": modes, "dense": len(dense),
                      "normalize": normalize, "dim": width,
                      "description": f"{kind} hidden {hidden} heads {heads}, pooling {'+'.join(modes)}, "
                                     f"dense [{', '.join(described)}], normalize {normalize}"})
    (out / "index.json").write_text(json.dumps({"cases": cases, "seq2seq": make_seq2seq(out),
                                                "byte_level": make_byte_level(out)}, indent=1))


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def make_seq2seq(out):
    """Encoder-decoders optimum's classes can size: the Whisper and BART fixtures' configs with
    as many decoder heads as encoder heads (optimum-onnx 0.1.0 sizes the first call's empty pasts,
    the decoder's and the encoder's, by the encoder's count: `config.num_attention_heads`), random
    weights, the fixtures' generation config and tokenizer files."""
    import shutil

    import transformers

    made = []
    for name, cls in [("whisper", transformers.WhisperForConditionalGeneration),
                      ("bart", transformers.BartForConditionalGeneration)]:
        torch.manual_seed(7)
        config = transformers.AutoConfig.from_pretrained(FIXTURES / name)
        config.decoder_attention_heads = config.encoder_attention_heads
        folder = out / f"{name}_same_heads"
        cls(config).eval().save_pretrained(folder)
        for f in (FIXTURES / name).iterdir():
            if f.name in ("generation_config.json", "tokenizer.json", "preprocessor_config.json"):
                shutil.copy(f, folder / f.name)
        made.append({"name": folder.name, "dir": str(folder),
                     "description": f"the {name} fixture with {config.encoder_attention_heads} heads on both sides"})
    return made


def make_byte_level(out):
    """The llama fixture with a byte-level BPE `tokenizer.json` of its 256 tokens (token `b` is
    byte `b`, no merges), so ExecuTorch's runner, whose tokenizer reads byte-level BPE but not the
    fixtures' Metaspace, can turn every token the model picks into text; no decoder, so each
    token's text is its printable byte-level character."""
    import shutil

    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    chars.update({b: chr(256 + i) for i, b in enumerate(b for b in range(256) if b not in chars)})
    folder = out / "llama_byte_level"
    shutil.copytree(FIXTURES / "llama", folder)
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": {chars[b]: b for b in range(256)}, "merges": []}
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                   "use_regex": True},
                 "post_processor": None, "decoder": None, "model": model}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    return {"name": folder.name, "dir": str(folder)}


def sentence_transformers_check(case):
    """SentenceTransformer over the export, with the backend of its format, against
    SentenceTransformer over the checkpoint."""
    from sentence_transformers import SentenceTransformer

    ref = SentenceTransformer(case["checkpoint"], device="cpu").encode(TEXTS, convert_to_numpy=True)
    kwargs = {"provider": "CPUExecutionProvider"} if case["format"] == "onnx" else \
        {"ov_config": {"INFERENCE_PRECISION_HINT": "f32"}}
    backend = "onnx" if case["format"] == "onnx" else "openvino"
    got = SentenceTransformer(case["export"], device="cpu", backend=backend, model_kwargs=kwargs).encode(
        TEXTS, convert_to_numpy=True)
    return worst(ref, got)


def fastembed_check(case):
    """fastembed's TextEmbedding over the export's `onnx/model.onnx` (its default file), as a custom model: its own
    pooling of `last_hidden_state` where it has the mode, else the export's
    `sentence_embedding`; against SentenceTransformer over the checkpoint."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType
    from sentence_transformers import SentenceTransformer

    ref = SentenceTransformer(case["checkpoint"], device="cpu").encode(TEXTS, convert_to_numpy=True)
    own = {"cls": PoolingType.CLS, "mean": PoolingType.MEAN, "lasttoken": PoolingType.LAST_TOKEN}
    pooled = len(case["pooling"]) == 1 and case["pooling"][0] in own and case["dense"] == 0
    name = f"hfexport/{Path(case['export']).name}"
    TextEmbedding.add_custom_model(
        model=name,
        pooling=own[case["pooling"][0]] if pooled else PoolingType.DISABLED,
        normalization=case["normalize"] if pooled else False,
        sources=ModelSource(hf=name),
        dim=case["dim"],
        output_name=None if pooled else "sentence_embedding",
    )
    model = TextEmbedding(model_name=name, specific_model_path=case["export"], providers=["CPUExecutionProvider"])
    return worst(ref, np.stack(list(model.embed(TEXTS))))


def optimum_check(case):
    """optimum's ORTModel / OVModel class of the task over the export, fed the fixture's golden
    inputs, against transformers' golden outputs."""
    from safetensors.torch import load_file

    gold = load_file(str(Path(case["checkpoint"]) / "golden.safetensors"))
    classes = {
        ("onnx", "feature-extraction"): ("optimum.onnxruntime", "ORTModelForFeatureExtraction", "last_hidden_state"),
        ("onnx", "sequence-classification"): ("optimum.onnxruntime", "ORTModelForSequenceClassification", "logits"),
        ("onnx", "image-classification"): ("optimum.onnxruntime", "ORTModelForImageClassification", "logits"),
        ("openvino", "feature-extraction"): ("optimum.intel.openvino", "OVModelForFeatureExtraction", "last_hidden_state"),
        ("openvino", "sequence-classification"): ("optimum.intel.openvino", "OVModelForSequenceClassification", "logits"),
        ("openvino", "image-classification"): ("optimum.intel.openvino", "OVModelForImageClassification", "logits"),
    }
    module, cls, output = classes[(case["format"], case["task"])]
    model_cls = getattr(__import__(module, fromlist=[cls]), cls)
    kwargs = {"provider": "CPUExecutionProvider"} if case["format"] == "onnx" else \
        {"ov_config": {"INFERENCE_PRECISION_HINT": "f32"}, "compile": True}
    model = model_cls.from_pretrained(case["export"], **kwargs)
    result = 0.0
    for c in ["single", "batch"]:
        inputs = {k: gold[f"{c}.{k}"] for k in ["input_ids", "attention_mask", "token_type_ids", "pixel_values"]
                  if f"{c}.{k}" in gold}
        with torch.no_grad():
            got = getattr(model(**inputs), output)
        want = gold[f"{c}.{output}"]
        if output == "last_hidden_state":  # rows at padded positions are unspecified
            keep = inputs["attention_mask"].bool()
            got, want = got[keep], want[keep]
        result = max(result, worst(want.numpy(), torch.as_tensor(got).numpy()))
    return result


def worst(ref, got):
    ref, got = np.asarray(ref, dtype=np.float32), np.asarray(got, dtype=np.float32)
    if ref.shape != got.shape:
        raise ValueError(f"shape {list(got.shape)}, the reference's is {list(ref.shape)}")
    return float(np.abs(ref - got).max())


def optimum_generation_check(case):
    """optimum's causal-LM class over a growing-cache generation export: `ORTModelForCausalLM`
    (`onnx/model.onnx`) or optimum-intel's `OVModelForCausalLM` (stateful, `openvino_model.xml`),
    its `generate` run as the fixture's greedy golden was (16 new tokens, no EOS stop), over a
    left-padded batch and with two beams; an error shows the first tokens that differ from
    transformers'."""
    from safetensors.torch import load_file

    gold = load_file(str(Path(case["checkpoint"]) / "golden.safetensors"))
    prompt, want = gold["greedy.prompt_ids"], gold["greedy.tokens"]
    if case["format"] == "onnx":
        from optimum.onnxruntime import ORTModelForCausalLM

        model = ORTModelForCausalLM.from_pretrained(case["export"])
    else:
        from optimum.intel.openvino import OVModelForCausalLM

        hints = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
        model = OVModelForCausalLM.from_pretrained(case["export"], ov_config=hints)
    n = want.shape[1]
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, eos_token_id=None, pad_token_id=0)
    compare("one prompt", out[:, prompt.shape[1]:], want)
    # a left-padded batch of two prompts, and beam search over two beams, against transformers'
    # generate of the same (tests/python/batched_generation.py)
    reference = json.loads(Path(case["reference"]).read_text())[case["checkpoint"]]
    for name, extra in [("batch", {}), ("beams", {"num_beams": 2})]:
        ref = reference[name]
        ids, mask = torch.tensor(ref["input_ids"]), torch.tensor(ref["attention_mask"])
        n = len(ref["tokens"][0])
        out = model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             eos_token_id=None, pad_token_id=0, **extra)
        compare(name, out[:, ids.shape[1]:], torch.tensor(ref["tokens"]))
    return 0.0


def transformersjs_check(case):
    """transformers.js (node, tests/js/generate.mjs) over a growing-cache ONNX export
    (`onnx/model.onnx`): the fixture's 16 greedy tokens of one prompt and 8 of a left-padded batch
    of two. Its beam search is not transformers' (no beam scores), so beams are not compared.
    With a `dtype` (`q4`: `onnx/model_q4.onnx`), the prompt's tokens are onnxruntime's own loop's
    over the same graph."""
    from safetensors.torch import load_file

    js = Path(__file__).resolve().parent.parent / "js"
    if not (js / "node_modules" / "@huggingface" / "transformers").is_dir():
        raise RuntimeError(f"transformers.js is not installed in {js}: run `cargo xtask setup --group clients`")
    gold = load_file(str(Path(case["checkpoint"]) / "golden.safetensors"))
    prompt, want = gold["greedy.prompt_ids"], gold["greedy.tokens"]
    requests = [
        {"input_ids": prompt.tolist(), "attention_mask": torch.ones_like(prompt).tolist(), "new_tokens": want.shape[1]},
    ]
    dtype = case.get("dtype", "fp32")
    if dtype == "fp32":
        batch = json.loads(Path(case["reference"]).read_text())[case["checkpoint"]]["batch"]
        requests.append({"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
                         "new_tokens": len(batch["tokens"][0])})
    else:
        # a quantized graph's tokens are onnxruntime's own over the same file, not transformers'
        import generate_onnx

        meta = json.loads((Path(case["export"]) / "export.json").read_text())
        graph = next(f for f in meta["components"][0]["files"] if f.endswith(".onnx"))
        session = generate_onnx.ort.InferenceSession(str(Path(case["export"]) / graph))
        want = torch.tensor([generate_onnx.growing_loop(session, prompt[0].tolist(), want.shape[1])])
    file = Path(case["export"]).with_suffix(".requests.json")
    file.write_text(json.dumps(requests))
    run = subprocess.run(["node", str(js / "generate.mjs"), case["export"], str(file), dtype], capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise RuntimeError(f"node generate.mjs failed:\n{run.stderr}")
    got = json.loads(run.stdout.strip().splitlines()[-1])
    compare("one prompt", torch.tensor(got[0]), want)
    if dtype == "fp32":
        compare("batch", torch.tensor(got[1]), torch.tensor(batch["tokens"]))
    return 0.0


def seq2seq_case(case):
    """The reference of an encoder-decoder check (tests/python/batched_generation.py --seq2seq,
    in the oracle's venv): its inputs as tensors, and transformers' tokens."""
    ref = json.loads(Path(case["reference"]).read_text())[case["checkpoint"]]
    inputs = {k: torch.tensor(v) for k, v in ref["inputs"].items()}
    return inputs, {k: torch.tensor(v) for k, v in ref.items() if k != "inputs"}


def optimum_seq2seq_check(case):
    """optimum's `ORTModelForSeq2SeqLM` / `ORTModelForSpeechSeq2Seq` over a growing-cache
    encoder-decoder ONNX export (`onnx/encoder_model.onnx`, `onnx/decoder_model_merged.onnx`), or
    optimum-intel's `OVModelForSeq2SeqLM` / `OVModelForSpeechSeq2Seq` over the stateful OpenVINO
    one (`openvino_encoder_model.xml`, `openvino_decoder_model.xml`): its `generate` gives
    transformers' tokens for a padded batch of two texts and with two beams, or for a speech
    clip."""
    inputs, want = seq2seq_case(case)
    speech = "input_features" in inputs
    if case["format"] == "onnx":
        from optimum.onnxruntime import ORTModelForSeq2SeqLM, ORTModelForSpeechSeq2Seq

        model = (ORTModelForSpeechSeq2Seq if speech else ORTModelForSeq2SeqLM).from_pretrained(case["export"])
    else:
        from optimum.intel.openvino import OVModelForSeq2SeqLM, OVModelForSpeechSeq2Seq

        hints = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
        model = (OVModelForSpeechSeq2Seq if speech else OVModelForSeq2SeqLM).from_pretrained(case["export"],
                                                                                            ov_config=hints)
    for name, extra in [("tokens", {}), ("beams", {"num_beams": 2})][:len(want)]:
        n = want[name].shape[1] - (0 if speech else 1)
        compare(name, model.generate(**inputs, max_new_tokens=n, do_sample=False, **extra), want[name])
    return 0.0


def transformersjs_seq2seq_check(case):
    """transformers.js (node, tests/js/seq2seq.mjs) over a growing-cache encoder-decoder export:
    `generate` gives transformers' tokens for a padded batch of two texts or a speech clip
    (transformers' Whisper `generate` leaves out the decoder's start token, transformers.js keeps
    it)."""
    js = Path(__file__).resolve().parent.parent / "js"
    inputs, want = seq2seq_case(case)
    want = want["tokens"]
    request = {k: {"shape": list(v.shape), "data": v.flatten().tolist()} if v.is_floating_point() else v.tolist()
               for k, v in inputs.items()}
    file = Path(case["export"]).with_suffix(".requests.json")
    n = want.shape[1] - (0 if "input_features" in inputs else 1)
    file.write_text(json.dumps([{**request, "new_tokens": n}]))
    run = subprocess.run(["node", str(js / "seq2seq.mjs"), case["export"], str(file)], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"node seq2seq.mjs failed:\n{run.stderr}")
    got = torch.tensor(json.loads(run.stdout.strip().splitlines()[-1])[0])
    if "input_features" in inputs:
        import transformers

        start = transformers.AutoConfig.from_pretrained(case["checkpoint"]).decoder_start_token_id
        if bool((got[:, 0] != start).any()):
            raise ValueError(f"tokens {got.tolist()} do not start with the decoder start token {start}")
        got = got[:, 1:]
    compare("speech" if "input_features" in inputs else "batch", got, want)
    return 0.0


def genai_check(case):
    """OpenVINO GenAI's `LLMPipeline(dir, "CPU")` over a stateful generation export, with its
    default backend (the model turned into PagedAttention for continuous batching), fed token ids
    (no tokenizer IRs needed): the fixture's 16 greedy tokens of one prompt and 8 of a left-padded
    batch of two."""
    import openvino as ov
    import openvino_genai
    from safetensors.torch import load_file

    gold = load_file(str(Path(case["checkpoint"]) / "golden.safetensors"))
    prompt, want = gold["greedy.prompt_ids"], gold["greedy.tokens"]
    pipe = openvino_genai.LLMPipeline(case["export"], "CPU", INFERENCE_PRECISION_HINT="f32",
                                      KV_CACHE_PRECISION="f32")
    batch = json.loads(Path(case["reference"]).read_text())[case["checkpoint"]]["batch"]
    runs = [("one prompt", prompt, torch.ones_like(prompt), want),
            ("batch", torch.tensor(batch["input_ids"]), torch.tensor(batch["attention_mask"]),
             torch.tensor(batch["tokens"]))]
    for name, ids, mask, tokens in runs:
        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = config.min_new_tokens = tokens.shape[1]
        inputs = openvino_genai.TokenizedInputs(ov.Tensor(ids.numpy()), ov.Tensor(mask.numpy()))
        compare(name, torch.tensor(pipe.generate(inputs, config).tokens), tokens)
    return 0.0


def optimum_executorch_check(case):
    """optimum-executorch's `ExecuTorchModelForCausalLM` over a default `.pte` generation export
    (ExecuTorch's LLM-runner layout: `forward(input_ids, cache_position)`, the cache in the
    program, the runner's constant methods): its `generate` of the fixture's prompt ids, the
    prompt in one call, gives transformers' greedy tokens (16, or up to the first EOS after the
    first token, where it stops)."""
    from optimum.executorch import ExecuTorchModelForCausalLM
    from safetensors.torch import load_file

    gold = load_file(str(Path(case["checkpoint"]) / "golden.safetensors"))
    prompt, want = gold["greedy.prompt_ids"][0].tolist(), gold["greedy.tokens"][0].tolist()
    model = ExecuTorchModelForCausalLM.from_pretrained(case["export"])
    got = model.generate(prompt, max_seq_len=len(prompt) + len(want))
    eos = set(model.eos_token_ids)
    stop = next((i + 1 for i, t in enumerate(want) if i > 0 and t in eos), len(want))
    compare("one prompt", torch.tensor([got]), torch.tensor([want[:stop]]))
    return 0.0


def executorch_runner_check(case):
    """ExecuTorch's own LLM runner (`TextLLMRunner`, the C++ `extension/llm` runner the wheel
    ships) over a default `.pte` generation export and the `tokenizer.json` it carries: its greedy
    pieces of a prompt, up to the EOS it stops at, are transformers' greedy tokens of the same ids
    (`add_special_tokens=False`: the runner adds no BOS by default)."""
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig as HfConfig

    tok = AutoTokenizer.from_pretrained(case["export"])
    prompt, n = "hello world", 16
    runner = TextLLMRunner(str(Path(case["export"]) / "model.pte"), case["export"])
    pieces = []
    runner.generate(prompt, GenerationConfig(temperature=0.0, max_new_tokens=n, echo=False, warming=True),
                    token_callback=pieces.append)
    ids = tok(prompt, add_special_tokens=False).input_ids
    model = AutoModelForCausalLM.from_pretrained(case["checkpoint"], dtype=torch.float32).eval()
    eos = HfConfig.from_pretrained(case["checkpoint"]).eos_token_id
    tokens = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=eos,
                            pad_token_id=0)[0, len(ids):].tolist()
    want = tok.convert_ids_to_tokens(tokens)
    if pieces != want:
        raise ValueError(f"the runner's pieces {pieces}, transformers' tokens {want}")
    return 0.0


def compare(case, got, want):
    """Raises, with both, unless the tokens are transformers'."""
    if got.shape != want.shape or bool((got != want).any()):
        raise ValueError(f"{case}: tokens {got.tolist()}, transformers' {want.tolist()}")


CHECKS = {"sentence-transformers": sentence_transformers_check, "fastembed": fastembed_check, "optimum": optimum_check,
          "optimum-generate": optimum_generation_check, "transformers.js": transformersjs_check,
          "openvino-genai": genai_check, "optimum-seq2seq": optimum_seq2seq_check,
          "transformers.js-seq2seq": transformersjs_seq2seq_check, "optimum-executorch": optimum_executorch_check,
          "executorch-runner": executorch_runner_check}


def check(plan):
    for case in json.loads(Path(plan).read_text()):
        line = {"case": case["name"], "client": case["client"]}
        try:
            line["worst"] = CHECKS[case["client"]](case)
        except Exception:  # the Rust test names the case and the client with the traceback
            line["error"] = traceback.format_exc()
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    command, path = sys.argv[1], Path(sys.argv[2])
    {"make": make, "check": check}[command](path)
