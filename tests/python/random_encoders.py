#!/usr/bin/env python3
"""Random encoder checkpoints with transformers' outputs, for tests/unseen_encoders.rs.

Usage: random_encoders.py OUTDIR --seed S --count N

Writes N folders (save_pretrained of a randomly configured BERT / RoBERTa / XLM-RoBERTa / CamemBERT /
XLM-RoBERTa-XL / DistilBERT / ELECTRA / ALBERT / MPNet / DeBERTa-v2 / ModernBERT / ViT / DeiT / DINOv2 / ResNet / ConvNeXt
(V1, V2) / MobileNetV2 / CLIP (CLIPModel, zero-shot: texts against images; the towers, projected or not) /
SigLIP (SiglipModel and its towers) / wav2vec2 / HuBERT / WavLM / Data2VecAudio (base, CTC, audio classifier) / BEiT / Data2VecVision / Swin / Swinv2 with one
of its heads, classes dealt round-robin) with golden.safetensors: for the cases `single` ([1, L])
and `batch` ([2, L], row 1 right-padded), the inputs (`input_ids`, `attention_mask`, and
`token_type_ids` when type_vocab_size > 1) and every output of the forward. OUTDIR/index.json
lists {name, dir, task, description} (and `image_size` where a convolutional net, or a patch
family whose positions are a square grid, is fed images of another size than its config's,
which its export is then asked for). The sampled space: heads 1-6 of head_dim 4-16, 1-3 layers,
any intermediate size, the activations the configs accept (gelu, gelu_new, relu, silu,
gelu_pytorch_tanh, quick_gelu), layer_norm_eps, 1-3 token types, 1-6 labels (id2label or
num_labels), tied or untied masked-LM decoders, ELECTRA's and ALBERT's embedding widths, ALBERT's
layer groups, MPNet's bias table rows, DeBERTa-v2's disentangled attention settings, BERT padding ids other than 0, sequence lengths
5-12 within max_position_embeddings; ModernBERT's windows, global layer periods or explicit layer
types, rope thetas (legacy keys or rope_parameters), biases, head activations and poolings; ResNet's
stages, widths, depths, layer types, downsampling flags, channels and image sizes; ConvNeXt's stages,
patches, layer scales, epsilons and image sizes; MobileNetV2's depth multipliers, expansions, output
strides, paddings and activations; CLIP's and SigLIP's tower sizes, end-of-text ids (legacy 2 or
not, present or not), projection and head widths and image sizes; wav2vec2's and HuBERT's feature
convolutions (count, widths, kernels, strides, biases, group or layer norms, activations), positional
kernels and groups, post- or pre-norm layers, HuBERT's projection norm, WavLM's buckets and distances, classifier projectors and clip
lengths (`input_values`, row 1 zero-padded; with its `attention_mask` where the checkpoint's feature extractor
returns one); Swin's and Swinv2's stages, heads, windows, patches, MLP ratios, biases, absolute positions,
pretrained windows and image sizes (`swin_keys`).
"""

import json
import math

import torch
import transformers
from safetensors.torch import save_file

import random_cases

CLASSES = [
    ("bert", "BertModel", "feature-extraction"),
    ("bert", "BertForMaskedLM", "fill-mask"),
    ("roberta", "RobertaForSequenceClassification", "sequence-classification"),
    ("xlm-roberta", "XLMRobertaForTokenClassification", "token-classification"),
    ("bert", "BertForQuestionAnswering", "question-answering"),
    ("roberta", "RobertaModel", "feature-extraction"),
    ("xlm-roberta", "XLMRobertaForMaskedLM", "fill-mask"),
    ("bert", "BertForSequenceClassification", "sequence-classification"),
    ("bert", "BertForTokenClassification", "token-classification"),
    ("roberta", "RobertaForQuestionAnswering", "question-answering"),
    ("roberta", "RobertaForMaskedLM", "fill-mask"),
    ("xlm-roberta", "XLMRobertaModel", "feature-extraction"),
    ("distilbert", "DistilBertForMaskedLM", "fill-mask"),
    ("distilbert", "DistilBertForSequenceClassification", "sequence-classification"),
    ("distilbert", "DistilBertForQuestionAnswering", "question-answering"),
    ("distilbert", "DistilBertModel", "feature-extraction"),
    ("vit", "ViTModel", "feature-extraction"),
    ("vit", "ViTForImageClassification", "image-classification"),
    ("modernbert", "ModernBertModel", "feature-extraction"),
    ("modernbert", "ModernBertForMaskedLM", "fill-mask"),
    ("modernbert", "ModernBertForSequenceClassification", "sequence-classification"),
    ("modernbert", "ModernBertForTokenClassification", "token-classification"),
    ("modernbert", "ModernBertForQuestionAnswering", "question-answering"),
    ("camembert", "CamembertForMaskedLM", "fill-mask"),
    ("camembert", "CamembertForSequenceClassification", "sequence-classification"),
    ("xlm-roberta-xl", "XLMRobertaXLForTokenClassification", "token-classification"),
    ("xlm-roberta-xl", "XLMRobertaXLModel", "feature-extraction"),
    ("electra", "ElectraForMaskedLM", "fill-mask"),
    ("electra", "ElectraForSequenceClassification", "sequence-classification"),
    ("electra", "ElectraForQuestionAnswering", "question-answering"),
    ("albert", "AlbertModel", "feature-extraction"),
    ("albert", "AlbertForMaskedLM", "fill-mask"),
    ("albert", "AlbertForTokenClassification", "token-classification"),
    ("mpnet", "MPNetForMaskedLM", "fill-mask"),
    ("mpnet", "MPNetForSequenceClassification", "sequence-classification"),
    ("deberta-v2", "DebertaV2ForSequenceClassification", "sequence-classification"),
    ("deberta-v2", "DebertaV2ForMaskedLM", "fill-mask"),
    ("deberta-v2", "DebertaV2ForTokenClassification", "token-classification"),
    # sentence-transformers folders over the bare encoders (SentenceTransformer saves them)
    ("bert", "BertModel", "sentence-embedding"),
    ("xlm-roberta", "XLMRobertaModel", "sentence-embedding"),
    ("modernbert", "ModernBertModel", "sentence-embedding"),
    ("distilbert", "DistilBertModel", "sentence-embedding"),
    ("roberta", "RobertaModel", "sentence-embedding"),
    ("camembert", "CamembertModel", "sentence-embedding"),
    ("electra", "ElectraModel", "sentence-embedding"),
    ("mpnet", "MPNetModel", "sentence-embedding"),
    ("deberta-v2", "DebertaV2Model", "sentence-embedding"),
    ("bert", "BertModel", "sentence-embedding"),
    ("resnet", "ResNetForImageClassification", "image-classification"),
    ("resnet", "ResNetModel", "feature-extraction"),
    ("resnet", "ResNetForImageClassification", "image-classification"),
    ("resnet", "ResNetModel", "feature-extraction"),
    ("convnext", "ConvNextForImageClassification", "image-classification"),
    ("convnext", "ConvNextModel", "feature-extraction"),
    ("convnextv2", "ConvNextV2ForImageClassification", "image-classification"),
    ("convnextv2", "ConvNextV2Model", "feature-extraction"),
    ("mobilenet_v2", "MobileNetV2ForImageClassification", "image-classification"),
    ("mobilenet_v2", "MobileNetV2Model", "feature-extraction"),
    ("deit", "DeiTForImageClassificationWithTeacher", "image-classification"),
    ("deit", "DeiTModel", "feature-extraction"),
    ("dinov2", "Dinov2ForImageClassification", "image-classification"),
    ("dinov2", "Dinov2Model", "feature-extraction"),
    ("clip", "CLIPModel", "zero-shot-image-classification"),
    ("clip_text", "CLIPTextModel", "feature-extraction"),
    ("clip", "CLIPModel", "zero-shot-image-classification"),
    ("siglip", "SiglipModel", "zero-shot-image-classification"),
    # the towers as classes of their own
    ("clip_text", "CLIPTextModelWithProjection", "feature-extraction"),
    ("clip_vision", "CLIPVisionModelWithProjection", "feature-extraction"),
    ("siglip_text", "SiglipTextModel", "feature-extraction"),
    ("siglip_vision", "SiglipVisionModel", "feature-extraction"),
    ("clip_vision", "CLIPVisionModel", "feature-extraction"),
    # raw-audio encoders
    ("wav2vec2", "Wav2Vec2ForCTC", "automatic-speech-recognition"),
    ("hubert", "HubertModel", "feature-extraction"),
    ("wav2vec2", "Wav2Vec2ForSequenceClassification", "sequence-classification"),
    ("hubert", "HubertForCTC", "automatic-speech-recognition"),
    ("wav2vec2", "Wav2Vec2Model", "feature-extraction"),
    ("hubert", "HubertForSequenceClassification", "sequence-classification"),
    ("wavlm", "WavLMForCTC", "automatic-speech-recognition"),
    ("wavlm", "WavLMModel", "feature-extraction"),
    ("wavlm", "WavLMForSequenceClassification", "sequence-classification"),
    ("data2vec-audio", "Data2VecAudioForCTC", "automatic-speech-recognition"),
    ("data2vec-audio", "Data2VecAudioForSequenceClassification", "sequence-classification"),
    ("data2vec-audio", "Data2VecAudioModel", "feature-extraction"),
    ("beit", "BeitModel", "feature-extraction"),
    ("beit", "BeitForImageClassification", "image-classification"),
    ("data2vec-vision", "Data2VecVisionForImageClassification", "image-classification"),
    ("beit", "BeitForImageClassification", "image-classification"),
    ("swin", "SwinForImageClassification", "image-classification"),
    ("swin", "SwinModel", "feature-extraction"),
    ("swin", "SwinForImageClassification", "image-classification"),
    ("swinv2", "Swinv2ForImageClassification", "image-classification"),
    ("swinv2", "Swinv2Model", "feature-extraction"),
]
POOLING_MODES = ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"]
# the activations hfexport builds for a sentence-transformers Dense module
DENSE_ACTIVATIONS = [torch.nn.Identity, torch.nn.Tanh, torch.nn.Sigmoid, torch.nn.ReLU, torch.nn.GELU, torch.nn.SiLU]
LEGACY_FLAGS = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens", "mean": "pooling_mode_mean_tokens",
                "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
                "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
CONFIGS = {
    "bert": "BertConfig",
    "roberta": "RobertaConfig",
    "xlm-roberta": "XLMRobertaConfig",
    "camembert": "CamembertConfig",
    "xlm-roberta-xl": "XLMRobertaXLConfig",
    "distilbert": "DistilBertConfig",
    "electra": "ElectraConfig",
    "albert": "AlbertConfig",
    "mpnet": "MPNetConfig",
    "deberta-v2": "DebertaV2Config",
    "vit": "ViTConfig",
    "modernbert": "ModernBertConfig",
    "resnet": "ResNetConfig",
    "convnext": "ConvNextConfig",
    "convnextv2": "ConvNextV2Config",
    "mobilenet_v2": "MobileNetV2Config",
    "deit": "DeiTConfig",
    "dinov2": "Dinov2Config",
    "clip": "CLIPConfig",
    "clip_text": "CLIPTextConfig",
    "siglip": "SiglipConfig",
    "clip_vision": "CLIPVisionConfig",
    "siglip_text": "SiglipTextConfig",
    "siglip_vision": "SiglipVisionConfig",
    "wav2vec2": "Wav2Vec2Config",
    "hubert": "HubertConfig",
    "wavlm": "WavLMConfig",
    "data2vec-audio": "Data2VecAudioConfig",
    "beit": "BeitConfig",
    "data2vec-vision": "Data2VecVisionConfig",
    "swin": "SwinConfig",
    "swinv2": "Swinv2Config",
}
BEIT = ("beit", "data2vec-vision")
AUDIO = ("wav2vec2", "hubert", "wavlm", "data2vec-audio")
# the tower classes: text towers read ids ending in their end-of-text id, image towers images
TEXT_TOWERS = ("clip_text", "siglip_text")
IMAGE_TOWERS = ("clip_vision", "siglip_vision")
# the families whose goldens take images (pixel_values at the config's image_size)
IMAGES = ("vit", "deit", "dinov2", "resnet", "convnext", "convnextv2", "mobilenet_v2", "beit", "data2vec-vision", "swin", "swinv2")
CONVOLUTIONAL = ("resnet", "convnext", "convnextv2", "mobilenet_v2")
# ModernBertConfig's names for BERT's keys
MODERNBERT_KEYS = {"hidden_act": "hidden_activation", "layer_norm_eps": "norm_eps",
                   "hidden_dropout_prob": "mlp_dropout", "attention_probs_dropout_prob": "attention_dropout"}
# DistilBertConfig's names for BERT's keys (it has no token types and a fixed epsilon)
DISTILBERT_KEYS = {"hidden_size": "dim", "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads",
                   "intermediate_size": "hidden_dim", "hidden_act": "activation", "hidden_dropout_prob": "dropout",
                   "attention_probs_dropout_prob": "attention_dropout"}
ACTS = ["gelu", "gelu_new", "relu", "silu", "gelu_pytorch_tanh", "quick_gelu"]
STD = 0.15


# the export's name of sentence-transformers' output: the token states under transformers' name
ST_NAMES = {"last_hidden_state": "token_embeddings"}


def outputs_of(task, model):
    return {
        "feature-extraction": ["last_hidden_state"] + (["pooler_output"] if getattr(model, "pooler", None) is not None else []),
        "fill-mask": ["logits"],
        "sequence-classification": ["logits"],
        "token-classification": ["logits"],
        "question-answering": ["start_logits", "end_logits"],
        "image-classification": ["logits"],
        "sentence-embedding": ["last_hidden_state", "sentence_embedding"],
        "zero-shot-image-classification": ["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"],
        "automatic-speech-recognition": ["logits"],
    }[task]


def sample(rng, index):
    family, cls_name, task = CLASSES[index % len(CLASSES)]
    if family == "resnet":
        return family, cls_name, task, 0, with_labels(rng, resnet_keys(rng, bottleneck=(index // 2) % 2 == 0))
    if family == "mobilenet_v2":
        return family, cls_name, task, 0, with_labels(rng, mobilenet_v2_keys(rng))
    if family in AUDIO:
        return family, cls_name, task, 0, with_labels(rng, audio_keys(rng, family))
    if family in ("convnext", "convnextv2"):
        return family, cls_name, task, 0, with_labels(rng, convnext_keys(rng, family == "convnext"))
    if family in ("swin", "swinv2"):
        return family, cls_name, task, 0, with_labels(rng, swin_keys(rng, family == "swinv2"))
    if family in ("clip", "siglip") + TEXT_TOWERS + IMAGE_TOWERS:
        seq = rng.randint(5, 12)
        text = clip_text_keys(rng, seq)
        if family in TEXT_TOWERS:
            # the projection's width (CLIP's WithProjection class; SigLIP's head, null: the hidden size)
            key = "projection_dim" if family == "clip_text" else "projection_size"
            text[key] = rng.choice([None, rng.randint(4, 20)] if key == "projection_size" else [rng.randint(4, 20)])
            return family, cls_name, task, seq, text
        if family in IMAGE_TOWERS:
            vision = clip_keys(rng, text)["vision_config"]
            if family == "clip_vision":
                vision["projection_dim"] = rng.randint(4, 20)
            return family, cls_name, task, seq, vision
        kw = clip_keys(rng, text)
        if family == "siglip":
            # no projections: the text head ends in the image tower's width
            kw.pop("projection_dim")
            v = kw["vision_config"]
            same = text["hidden_size"] == v["hidden_size"]
            text["projection_size"] = None if same and rng.random() < 0.5 else v["hidden_size"]
        return family, cls_name, task, seq, kw
    heads, head_dim = rng.choice([1, 2, 3, 4, 6]), rng.choice([4, 8, 12, 16])
    seq = rng.randint(5, 12)
    roberta = family in ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl", "mpnet")
    pad = 1 if roberta else rng.choice([0, 0, 5])
    kw = dict(
        vocab_size=rng.randint(40, 120),
        hidden_size=heads * head_dim,
        num_hidden_layers=rng.randint(1, 3),
        num_attention_heads=heads,
        intermediate_size=rng.randint(8, 64),
        hidden_act=rng.choice(ACTS),
        layer_norm_eps=rng.choice([1e-12, 1e-6, 1e-5]),
        type_vocab_size=rng.choice([1, 2, 3]) if not roberta else rng.choice([1, 1, 2]),
        max_position_embeddings=seq + (pad + 1 if roberta else 0) + rng.randint(0, 20),
        pad_token_id=pad,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        tie_word_embeddings=rng.random() < 0.6,
    )
    # a span head's linear has num_labels outputs, split into start and end: 2
    labels = 2 if task == "question-answering" else rng.randint(1, 6)
    if family == "distilbert":
        kw = {DISTILBERT_KEYS.get(k, k): v for k, v in kw.items() if k not in ("layer_norm_eps", "type_vocab_size")}
        kw["sinusoidal_pos_embds"] = rng.random() < 0.5
    if family in ("vit", "deit"):
        drop = ("vocab_size", "type_vocab_size", "max_position_embeddings", "pad_token_id", "tie_word_embeddings")
        kw = {k: v for k, v in kw.items() if k not in drop}
        patch = [rng.choice([2, 3, 4]), rng.choice([2, 3, 4])]
        kw.update(
            patch_size=patch if patch[0] != patch[1] or rng.random() < 0.5 else patch[0],
            image_size=[patch[0] * rng.randint(1, 4), patch[1] * rng.randint(1, 4)],
            num_channels=rng.choice([1, 3, 4]),
            qkv_bias=rng.random() < 0.7,
            pooler_output_size=rng.choice([None, rng.randint(4, 40)]),
            pooler_act=rng.choice(["tanh", "tanh", "relu", "gelu"]),
        )
    if family == "dinov2":
        # square images of square patches (its stored grid is square), no pooler dense
        drop = ("vocab_size", "type_vocab_size", "max_position_embeddings", "pad_token_id", "tie_word_embeddings",
                "intermediate_size")
        kw = {k: v for k, v in kw.items() if k not in drop}
        patch = rng.choice([2, 3, 4])
        kw.update(
            patch_size=patch,
            image_size=patch * rng.randint(1, 4),
            num_channels=rng.choice([1, 3, 4]),
            qkv_bias=rng.random() < 0.7,
            mlp_ratio=rng.choice([1, 2, 3, 4]),
            layerscale_value=rng.choice([1.0, 0.1, 1e-5]),
            use_swiglu_ffn=rng.random() < 0.4,
        )
    if family in BEIT:
        drop = ("vocab_size", "type_vocab_size", "max_position_embeddings", "pad_token_id", "tie_word_embeddings")
        kw = {k: v for k, v in kw.items() if k not in drop}
        kw.update(beit_keys(rng))
    if family in ("electra", "albert"):
        # embeddings as wide as the layers (ELECTRA then has no projection) or of their own width
        kw["embedding_size"] = rng.choice([kw["hidden_size"], rng.randint(4, 40)])
    if family == "albert":
        # groups beyond the layer count leave some unused; non-dividing counts share unevenly
        kw.update(num_hidden_groups=rng.randint(1, 3), inner_group_num=rng.randint(1, 2))
    if family == "mpnet":
        # no token types; a bias table of at least the 32 buckets MPNet always uses
        kw.pop("type_vocab_size")
        kw["relative_attention_num_buckets"] = rng.choice([32, 32, 40, 64])
    if family == "deberta-v2":
        kw.update(deberta_keys(rng, kw))
    if family == "modernbert":
        kw = {MODERNBERT_KEYS.get(k, k): v for k, v in kw.items() if k != "type_vocab_size"}
        kw.update(modernbert_keys(rng, kw["num_hidden_layers"], kw["pad_token_id"]))
    if rng.random() < 0.5:
        kw["id2label"] = {i: f"L{i}" for i in range(labels)}
    else:
        kw["num_labels"] = labels
    return family, cls_name, task, seq, kw


def beit_keys(rng):
    """BEiT's and Data2VecVision's switches over ViT's keys: relative position biases per layer, shared or both, absolute
    positions (then over a square grid, which transformers resamples), layer scales or none, mean pooling or the class
    token; one square patch size, as their relative bias needs."""
    patch = rng.choice([2, 3, 4])
    absolute = rng.random() < 0.4
    rows = rng.randint(1, 4)
    cols = rows if absolute else rng.randint(1, 4)
    return dict(
        patch_size=patch,
        image_size=[patch * rows, patch * cols] if rows != cols else patch * rows,
        use_absolute_position_embeddings=absolute,
        use_relative_position_bias=rng.random() < 0.6,
        use_shared_relative_position_bias=rng.random() < 0.5,
        layer_scale_init_value=rng.choice([0.0, 0.1, 1.0]),
        use_mean_pooling=rng.random() < 0.6,
        num_channels=rng.choice([1, 3, 4]),
    )


def audio_keys(rng, family):
    """A raw-audio encoder: 1-4 convolutions of random kernels and strides (kernels of 1 included), group or layer
    norms, biases, activations; the positional convolution's kernel (odd or even) and groups (Data2VecAudio's: a stack
    of 1-3); post- or pre-norm layers (do_stable_layer_norm); HuBERT's optional norm before the projection; WavLM's bucket counts and
    distances (short enough for the clips to reach the logarithmic buckets); the classifier's projector."""
    heads, head_dim = rng.choice([1, 2, 4]), rng.choice([4, 8])
    hidden = heads * head_dim
    n = rng.randint(1, 4)
    kw = dict(
        vocab_size=rng.randint(5, 40),
        hidden_size=hidden,
        num_hidden_layers=rng.randint(1, 3),
        num_attention_heads=heads,
        intermediate_size=rng.randint(8, 48),
        hidden_act=rng.choice(ACTS),
        layer_norm_eps=rng.choice([1e-5, 1e-6]),
        conv_dim=[rng.randint(2, 16) for _ in range(n)],
        conv_kernel=[rng.randint(1, 10) for _ in range(n)],
        conv_stride=[rng.randint(1, 5) for _ in range(n)],
        conv_bias=rng.random() < 0.5,
        feat_extract_norm=rng.choice(["group", "layer"]),
        feat_extract_activation=rng.choice(["gelu", "relu", "silu"]),
        num_conv_pos_embeddings=rng.randint(1, 9),
        num_conv_pos_embedding_groups=rng.choice([g for g in (1, 2, 4) if hidden % g == 0]),
        do_stable_layer_norm=rng.random() < 0.5,
        classifier_proj_size=rng.randint(2, 20),
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
        final_dropout=0.0, layerdrop=0.0,
    )
    if family == "hubert":
        kw["feat_proj_layer_norm"] = rng.random() < 0.5
    if family == "wavlm":
        buckets = rng.choice([4, 8, 16, 32])
        kw.update(num_buckets=buckets, max_bucket_distance=buckets // 4 + rng.randint(1, 40))
    if family == "data2vec-audio":
        # layer norms after every convolution and post-norm layers, whatever these keys say
        for key in ("feat_extract_norm", "do_stable_layer_norm"):
            kw.pop(key)
        kw.update(num_conv_pos_embeddings=rng.randint(1, 3), conv_pos_kernel_size=rng.randint(1, 9))
    return kw


def audio_samples(kw, rng):
    """A clip length of at least one receptive field and up to a few dozen frames more."""
    field = 1
    for k, s in zip(reversed(kw["conv_kernel"]), reversed(kw["conv_stride"])):
        field = (field - 1) * s + k
    stride = 1
    for s in kw["conv_stride"]:
        stride *= s
    return field + stride * rng.randint(0, 30) + rng.randint(0, stride)


def clip_text_keys(rng, seq):
    """A CLIPTextConfig: heads, widths, depth, activation, epsilon, positions beyond `seq`, and an
    end-of-text id that is the legacy 2 (pooled at the largest id), the last id, or any."""
    heads, head_dim, vocab = rng.choice([1, 2, 4]), rng.choice([4, 8, 12]), rng.randint(40, 120)
    return dict(
        vocab_size=vocab, hidden_size=heads * head_dim, intermediate_size=rng.randint(8, 64),
        num_hidden_layers=rng.randint(1, 3), num_attention_heads=heads,
        max_position_embeddings=seq + rng.randint(0, 20), hidden_act=rng.choice(ACTS),
        layer_norm_eps=rng.choice([1e-6, 1e-5]), bos_token_id=0, pad_token_id=1,
        eos_token_id=rng.choice([2, vocab - 1, rng.randint(3, vocab - 1)]),
    )


def clip_keys(rng, text):
    """A CLIPConfig over `text`: a vision tower of its own sizes, square images of square patches
    (CLIP's), 1-4 channels, and the projection width (never a sequence length of 5-12)."""
    heads, head_dim, patch = rng.choice([1, 2, 3]), rng.choice([4, 8]), rng.choice([2, 3, 4])
    vision = dict(
        hidden_size=heads * head_dim, intermediate_size=rng.randint(8, 48), num_hidden_layers=rng.randint(1, 3),
        num_attention_heads=heads, image_size=patch * rng.randint(1, 4), patch_size=patch,
        num_channels=rng.choice([1, 3, 4]), hidden_act=rng.choice(ACTS), layer_norm_eps=rng.choice([1e-6, 1e-5]),
    )
    return dict(text_config=text, vision_config=vision, projection_dim=rng.choice([4, 16, 24]))


def clip_inputs(gen, rng, text, rows, seq):
    """Text rows of ids above the specials, most ending in the end-of-text id (the largest id for
    the legacy 2) as the tokenizer ends them, row 1 right-padded with id 1."""
    ids = torch.randint(3, text["vocab_size"] - 1, (rows, seq), generator=gen)
    mask = torch.ones_like(ids)
    for r in range(rows):
        end = seq - (rng.randint(1, seq - 2) if r == 1 else 0)
        if rng.random() < 0.8:
            eos = text["eos_token_id"]
            ids[r, end - 1] = text["vocab_size"] - 1 if eos == 2 else eos
        ids[r, end:] = 1
        mask[r, end:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def resnet_keys(rng, bottleneck):
    """1-4 stages of basic or bottleneck layers (widths repeated sometimes: identity shortcuts),
    1-3 layers each, downsampling in the first stage and in the bottleneck or not, any activation,
    1-4 channels, image sides 5-40 (odd ones through every stride), 1-6 labels."""
    widths = []
    for _ in range(rng.randint(1, 4)):
        fresh = 4 * rng.randint(1, 5) if bottleneck else rng.randint(2, 20)
        widths.append(widths[-1] if widths and rng.random() < 0.3 else fresh)
    kw = dict(
        embedding_size=rng.choice([widths[0], rng.randint(2, 12)]),
        hidden_sizes=widths,
        depths=[rng.randint(1, 3) for _ in widths],
        layer_type="bottleneck" if bottleneck else "basic",
        hidden_act=rng.choice(ACTS),
        downsample_in_first_stage=rng.random() < 0.4,
        downsample_in_bottleneck=rng.random() < 0.4,
        num_channels=rng.choice([1, 3, 4]),
        image_size=[rng.randint(5, 40), rng.randint(5, 40)],
    )
    return kw


def convnext_keys(rng, v1):
    """1-4 stages of 1-3 blocks at 2-20 channels (repeats too: the later stages still
    downsample), patches 1-4 (square or not), V1's layer scale on or off, any activation, final
    norm epsilons, 1-4 channels, image sides 8-48 (not multiples of the patch)."""
    stages = rng.randint(1, 4)
    patch = [rng.randint(1, 4), rng.randint(1, 4)]
    kw = dict(
        num_stages=stages,
        hidden_sizes=[rng.randint(2, 20) for _ in range(stages)],
        depths=[rng.randint(1, 3) for _ in range(stages)],
        patch_size=patch if patch[0] != patch[1] or rng.random() < 0.5 else patch[0],
        hidden_act=rng.choice(ACTS),
        layer_norm_eps=rng.choice([1e-12, 1e-6, 1e-5]),
        num_channels=rng.choice([1, 3, 4]),
        image_size=[rng.randint(8, 48), rng.randint(8, 48)],
    )
    if v1:
        kw["layer_scale_init_value"] = rng.choice([0.0, 1e-6, 0.5])
    return kw


def swin_keys(rng, v2):
    """1-3 stages of 1-3 layers, 1-6 heads per stage over widths their multiple, windows 1-4,
    patches 1-4 (square or not), MLP ratios, qkv biases on or off, absolute positions or not (V1;
    transformers' V2 fails on them), V2's pretrained windows (0 or 2-8 per stage), any
    activation, epsilons, 1-4 channels, image sides (`swin_side`)."""
    stages = rng.randint(1, 3)
    heads = [rng.choice([1, 2, 3, 4, 6]) for _ in range(stages)]
    patch = [rng.randint(1, 4), rng.randint(1, 4)]
    kw = dict(
        embed_dim=math.lcm(*heads) * rng.randint(1, 2) * (2 if max(heads) == 1 else 1),
        depths=[rng.randint(1, 3) for _ in range(stages)],
        num_heads=heads,
        window_size=rng.randint(1, 4),
        patch_size=patch if patch[0] != patch[1] or rng.random() < 0.5 else patch[0],
        mlp_ratio=rng.choice([1.0, 2.5, 4.0]),
        qkv_bias=rng.random() < 0.7,
        use_absolute_embeddings=not v2 and rng.random() < 0.3,
        hidden_act=rng.choice(ACTS),
        layer_norm_eps=rng.choice([1e-6, 1e-5]),
        num_channels=rng.choice([1, 3, 4]),
    )
    if v2:
        kw["pretrained_window_sizes"] = [rng.choice([0, 0, rng.randint(2, 8)]) for _ in range(stages)]
    kw["image_size"] = [swin_side(rng, kw, axis) for axis in (0, 1)]
    return kw


def swin_side(rng, kw, axis):
    """An image side (4-64 pixels) at which every stage of Swin `kw` sees at least a window of
    patches along `axis` (transformers fails on less); with absolute positions, a multiple of
    the patch (the learned grid must fit). Swinv2 fixes its windows from the configured size:
    there, one whose last stage has a patch at all."""
    patch, window, stages = pair(kw["patch_size"])[axis], kw["window_size"], len(kw["depths"])

    def fits(side):
        if "pretrained_window_sizes" in kw:
            return (side // patch) >> (stages - 1) >= 1
        grid = -(-side // patch)
        for _ in range(stages - 1):
            grid = -(-grid // 2)
        return grid >= window and (not kw["use_absolute_embeddings"] or side % patch == 0)

    return rng.choice([side for side in range(4, 65) if fits(side)])


def pair(v):
    """An image or patch size key as `[height, width]`."""
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


def square_grid(kw):
    """Whether the config's image size makes a square grid of patches."""
    (ih, iw), (ph, pw) = pair(kw["image_size"]), pair(kw["patch_size"])
    return ih // ph == iw // pw


def mobilenet_v2_keys(rng):
    """Depth multipliers 0.05-0.35 with their rounding (divisors, minimum depths), expansion
    ratios, output strides 8-32 (dilated layers past them), the stem's own expansion or not, the
    fine-grained 1280-wide output or not, TensorFlow or torch padding, norm epsilons, relu6 or
    another activation, 1-4 channels, image sides 8-48."""
    return dict(
        depth_multiplier=rng.choice([0.05, 0.1, 0.2, 0.35]),
        depth_divisible_by=rng.choice([2, 4, 8]),
        min_depth=rng.choice([2, 4, 8]),
        expand_ratio=rng.choice([1.0, 1.5, 2.0, 3.0]),
        output_stride=rng.choice([8, 16, 32, 32]),
        first_layer_is_expansion=rng.random() < 0.5,
        finegrained_output=rng.random() < 0.5,
        tf_padding=rng.random() < 0.6,
        layer_norm_eps=rng.choice([1e-3, 1e-5]),
        hidden_act=rng.choice(["relu6", "relu6"] + ACTS),
        num_channels=rng.choice([1, 3, 4]),
        image_size=[rng.randint(8, 48), rng.randint(8, 48)],
    )


def with_labels(rng, kw):
    """`kw` with 1-6 labels, as `id2label` or `num_labels`."""
    labels = rng.randint(1, 6)
    if rng.random() < 0.5:
        kw["id2label"] = {i: f"L{i}" for i in range(labels)}
    else:
        kw["num_labels"] = labels
    return kw


def deberta_keys(rng, kw):
    """Disentangled attention on or off; log buckets (some beyond the sequence, some cutting it) or
    clamped distances; c2p, p2c or both (a list or the legacy string); shared or own position
    projections; normed relative embeddings or not; absolute positions, token types, embedding
    widths and the context pooler's activation."""
    terms = rng.sample(["c2p", "p2c"], rng.choice([1, 2, 2]))
    max_rel = rng.choice([-1, -1, 3, 6, 20])
    resolved = kw["max_position_embeddings"] if max_rel < 1 else max_rel
    buckets = rng.choice([-1, 4, 6, 8, 16])
    if buckets > 0 and resolved <= buckets // 2 + 1:
        buckets = -1
    return dict(
        relative_attention=rng.random() < 0.85,
        position_buckets=buckets,
        max_relative_positions=max_rel,
        pos_att_type="|".join(terms) if rng.random() < 0.5 else terms,
        share_att_key=rng.random() < 0.5,
        norm_rel_ebd=rng.choice(["none", "layer_norm"]),
        position_biased_input=rng.random() < 0.5,
        type_vocab_size=rng.choice([0, 0, 2]),
        embedding_size=rng.choice([kw["hidden_size"], rng.randint(4, 40)]),
        pooler_hidden_act=rng.choice(ACTS),
    )


def modernbert_keys(rng, layers, pad):
    """Windows that cut the sequence (local_attention 1-9: 0-4 tokens each side), the global layer
    period or an explicit layer_types, rope thetas in either spelling, every bias and head key."""
    kw = dict(
        local_attention=rng.randint(1, 9),
        norm_bias=rng.random() < 0.5,
        attention_bias=rng.random() < 0.5,
        mlp_bias=rng.random() < 0.5,
        classifier_bias=rng.random() < 0.5,
        classifier_activation=rng.choice(ACTS),
        classifier_pooling=rng.choice(["cls", "mean"]),
        decoder_bias=rng.random() < 0.7,
        num_hidden_layers=rng.randint(1, 4),
        bos_token_id=pad, eos_token_id=pad, cls_token_id=pad, sep_token_id=pad,
    )
    if rng.random() < 0.3:
        kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(kw["num_hidden_layers"])]
    else:
        kw["global_attn_every_n_layers"] = rng.randint(1, 3)
    thetas = (rng.choice([100.0, 10_000.0, 160_000.0]), rng.choice([10.0, 500.0, 10_000.0]))
    if rng.random() < 0.5:
        kw.update(global_rope_theta=thetas[0], local_rope_theta=thetas[1])
    else:
        kw["rope_parameters"] = {"full_attention": {"rope_type": "default", "rope_theta": thetas[0]},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": thetas[1]}}
    return kw


def main():
    cases = []
    for out, i, seed, rng in random_cases.cases(12):
        family, cls_name, task, seq, kw = sample(rng, i)
        # a convolutional net takes images of any size: every other one is fed another than its
        # config's (the export is then asked for that size)
        image_size = None
        if family in CONVOLUTIONAL and rng.random() < 0.5:
            image_size = [rng.randint(8, 48), rng.randint(8, 48)]
        # Swin too, where its positions are not learned for the configured size
        if family in ("swin", "swinv2") and not kw["use_absolute_embeddings"] and rng.random() < 0.5:
            image_size = [swin_side(rng, kw, axis) for axis in (0, 1)]
        # a patch family resamples its positions to other image sizes, when its stored grid is
        # square (ViT and DeiT as `interpolate_pos_encoding=True` asks, DINOv2 always)
        resamples = family in ("vit", "deit", "dinov2") + BEIT
        absolute = family not in BEIT or kw["use_absolute_position_embeddings"]
        if resamples and (square_grid(kw) or not absolute) and rng.random() < 0.7:
            ph, pw = pair(kw["patch_size"])
            image_size = [ph * rng.randint(1, 5), pw * rng.randint(1, 5)]
        if family in ("clip", "siglip") + IMAGE_TOWERS and rng.random() < 0.5:
            p = kw.get("vision_config", kw)["patch_size"]
            image_size = [p * rng.randint(1, 5), p * rng.randint(1, 5)]
        config = getattr(transformers, CONFIGS[family])(**kw)
        config._attn_implementation = "eager"
        torch.manual_seed(seed)
        model = getattr(transformers, cls_name)(config).eval()
        with torch.no_grad():
            # He's scale for a batch-normed net's convolutions, as the fixtures draw them
            batch_normed = any(n.endswith("running_var") for n, _ in model.named_buffers())
            for name, p in model.named_parameters():
                std = (2.0 / p[0].numel()) ** 0.5 if batch_normed and p.dim() == 4 else STD
                noise = torch.randn_like(p) * std
                p.copy_(1.0 + noise if "norm" in name.lower() and name.endswith("weight") else noise)
            # batch norms' running statistics (ResNet's, MobileNet's), within 20% of 1
            for name, b in model.named_buffers():
                if name.endswith("running_mean"):
                    b.copy_(torch.randn_like(b) * STD)
                elif name.endswith("running_var"):
                    b.copy_(0.8 + 0.4 * torch.rand_like(b))
        name = f"{i:02d}-{cls_name}"
        folder = out / name
        model.save_pretrained(folder, safe_serialization=True)
        # an audio checkpoint's feature extractor may return an attention mask (the layer-normed
        # ones' do; transformers takes one with any norm)
        audio_mask = family in AUDIO and rng.random() < 0.5
        if family in AUDIO:
            transformers.Wav2Vec2FeatureExtractor(return_attention_mask=audio_mask).save_pretrained(folder)
        model = getattr(transformers, cls_name).from_pretrained(folder, attn_implementation="eager").eval()
        if task == "sentence-embedding":
            model, pooling = sentence_transformer(rng, folder, config)
            kw["pooling"] = pooling
        gen = torch.Generator().manual_seed(i)
        golden = {}
        for case, rows in [("single", 1), ("batch", 2)]:
            if family in ("clip", "siglip"):
                # texts and one image more, the two batches independent
                v = kw["vision_config"]
                size = image_size or [v["image_size"]] * 2
                inputs = clip_inputs(gen, rng, kw["text_config"], rows, seq)
                inputs["pixel_values"] = torch.randn((rows + 1, v["num_channels"], *size), generator=gen)
                with torch.no_grad():
                    res = model(**inputs, interpolate_pos_encoding=image_size is not None)
                for k, t in inputs.items():
                    golden[f"{case}.{k}"] = t.contiguous()
                for k in outputs_of(task, model):  # copies: logits_per_image is a view of logits_per_text
                    golden[f"{case}.{k}"] = getattr(res, k).float().contiguous().clone()
                continue
            if family in TEXT_TOWERS + IMAGE_TOWERS:
                if family in TEXT_TOWERS:
                    inputs, extra = clip_inputs(gen, rng, kw, rows, seq), {}
                else:
                    size = image_size or [kw["image_size"]] * 2
                    inputs = {"pixel_values": torch.randn((rows, kw["num_channels"], *size), generator=gen)}
                    extra = {"interpolate_pos_encoding": image_size is not None}
                with torch.no_grad():
                    res = model(**inputs, **extra)
                for k, t in inputs.items():
                    golden[f"{case}.{k}"] = t.contiguous()
                pooled = [k for k in ("text_embeds", "image_embeds", "pooler_output") if getattr(res, k, None) is not None]
                for k in ["last_hidden_state"] + pooled:  # copies: the pooled rows are a view
                    golden[f"{case}.{k}"] = getattr(res, k).float().contiguous().clone()
                continue
            if family in AUDIO:
                # clips zero-padded to one length (no attention mask), row 1 padded
                samples = audio_samples(kw, rng)
                values = torch.randn((rows, samples), generator=gen)
                mask = torch.ones((rows, samples), dtype=torch.int64)
                if rows == 2:
                    cut = rng.randint(0, samples // 2)
                    values[1, samples - cut :] = 0.0
                    mask[1, samples - cut :] = 0
                inputs = {"input_values": values, **({"attention_mask": mask} if audio_mask else {})}
                with torch.no_grad():
                    res = model(**inputs)
                for k, t in inputs.items():
                    golden[f"{case}.{k}"] = t.contiguous()
                for k in outputs_of(task, model):
                    golden[f"{case}.{k}"] = getattr(res, k).float().contiguous().clone()
                continue
            if family in IMAGES:
                size = image_size or kw["image_size"]
                size = size if isinstance(size, list) else [size, size]
                inputs = {"pixel_values": torch.randn((rows, kw["num_channels"], *size), generator=gen)}
                if image_size and family in ("vit", "deit") + BEIT:
                    inputs["interpolate_pos_encoding"] = True
                with torch.no_grad():
                    res = model(**inputs)
                inputs.pop("interpolate_pos_encoding", None)
                golden[f"{case}.pixel_values"] = inputs["pixel_values"].contiguous()
                names = outputs_of(task, model.base_model)
                if task == "feature-extraction":
                    # pooled where the class pools (ViT's pooler, ResNet's average, ConvNeXt's norm)
                    names = ["last_hidden_state"] + (["pooler_output"] if res.pooler_output is not None else [])
                for k in names:  # copies: a pooled output may be a view of the states (DINOv2's)
                    golden[f"{case}.{k}"] = getattr(res, k).float().contiguous().clone()
                continue
            # ids above the padding and special ids
            ids = torch.randint(max(pad_of(kw), 2) + 1, kw["vocab_size"], (rows, seq), generator=gen)
            mask = torch.ones_like(ids)
            if rows == 2:
                cut = rng.randint(1, seq - 2)
                ids[1, seq - cut :] = kw["pad_token_id"]
                mask[1, seq - cut :] = 0
            inputs = {"input_ids": ids, "attention_mask": mask}
            if kw.get("type_vocab_size", 0) > 1:
                inputs["token_type_ids"] = torch.randint(0, kw["type_vocab_size"], (rows, seq), generator=gen)
            with torch.no_grad():
                res = model(dict(inputs)) if task == "sentence-embedding" else model(**inputs)
            for k, v in inputs.items():
                golden[f"{case}.{k}"] = v.contiguous()
            for k in outputs_of(task, getattr(model, "base_model", model)):
                value = res[ST_NAMES.get(k, k)] if task == "sentence-embedding" else getattr(res, k)
                golden[f"{case}.{k}"] = value.float().contiguous()
        save_file(golden, str(folder / "golden.safetensors"))
        desc = f"{cls_name} " + json.dumps({k: v for k, v in kw.items() if "dropout" not in k and k != "id2label"})
        desc += f" labels {config.num_labels} seq {seq}"
        case = {"name": name, "dir": name, "task": task, "description": desc}
        if image_size:
            case["image_size"] = image_size
            case["description"] += f" images {image_size}"
        cases.append(case)
        print(desc)
    (out / "index.json").write_text(json.dumps({"cases": cases}, indent=1))


def sentence_transformer(rng, folder, config):
    """`folder` made a sentence-transformers checkpoint by SentenceTransformer.save: the encoder,
    a Pooling of 1-3 random modes (a single mode sometimes rewritten in the legacy
    `pooling_mode_*` form the hub's older folders use), 0-2 Dense modules (random widths, bias,
    activation, residual; torch's default initialisation under the case's seed), a Normalize or
    not, and a small WordPiece tokenizer (SentenceTransformer loads one; the goldens feed ids).
    Returns the model loaded back from the folder, and the modules as the description says them."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(config.vocab_size)]
    (folder / "vocab.txt").write_text("\n".join(words[: config.vocab_size]) + "\n")
    transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    modes = rng.sample(POOLING_MODES, rng.choice([1, 1, 2, 3]))
    normalize = rng.random() < 0.5
    encoder = Transformer(str(folder), model_kwargs={"attn_implementation": "eager"})
    hidden = config.hidden_size if hasattr(config, "hidden_size") else config.dim
    modules = [encoder, Pooling(hidden, pooling_mode=modes[0] if len(modes) == 1 else tuple(modes))]
    width, dense = hidden * len(modes), []
    for _ in range(rng.choice([0, 0, 1, 2])):
        out = rng.choice([width, rng.randint(4, 24)])
        act = rng.choice(DENSE_ACTIVATIONS)
        bias, residual = rng.random() < 0.7, rng.random() < 0.4
        modules.append(Dense(width, out, bias=bias, activation_function=act(), use_residual=residual))
        dense.append(f"{act.__name__} {width}->{out}{'' if bias else ' no bias'}{' residual' if residual else ''}")
        width = out
    if normalize:
        modules.append(Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    legacy = len(modes) == 1 and rng.random() < 0.5
    if legacy:
        path = folder / "1_Pooling" / "config.json"
        cfg = json.loads(path.read_text())
        cfg.pop("pooling_mode")
        cfg.update({flag: mode == modes[0] for mode, flag in LEGACY_FLAGS.items()})
        path.write_text(json.dumps(cfg, indent=2))
    model = SentenceTransformer(str(folder), device="cpu", model_kwargs={"attn_implementation": "eager"}).eval()
    return model, {"modes": modes, "dense": dense, "normalize": normalize, "legacy": legacy}


def pad_of(kw):
    return kw["pad_token_id"]


if __name__ == "__main__":
    main()
