"""Export Hugging Face checkpoints to ONNX, OpenVINO IR, ExecuTorch and .pt2, without Python
at export time.

The work is the Rust library in ``hfexport._native``; this module turns keyword arguments into
the command line's flags (so Python and the shell accept the same options and print the same
errors) and JSON into dicts.

    >>> import hfexport
    >>> meta = hfexport.export("tests/fixtures/qwen3", "onnx", "out", dynamic=True, force=True)
    >>> hfexport.inspect("out", check=True)["format"]
    'onnx'
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Union

from . import _native
from ._native import HfExportError, __version__
from ._progress import default_progress

__all__ = ["export", "inspect", "HfExportError", "__version__"]

# The runners (verify=True, `hfexport run` and `generate`) load ONNX Runtime and OpenVINO from
# the wheels installed beside this package: they search this interpreter's import path first
# (crates/hfexport-core/src/venv.rs), however it was started (an activated venv or not).
os.environ.setdefault("HFEXPORT_SITE_PACKAGES", os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))

PathLike = Union[str, "os.PathLike[str]"]
Progress = Union[bool, None, Callable[[Dict[str, Any]], None]]


def export(model: PathLike, format: str, output: PathLike, *, progress: Progress = True, **options: Any) -> Dict[str, Any]:
    """Exports the checkpoint ``model`` to ``format`` into the folder ``output``.

    ``model``: a checkpoint folder (config.json + safetensors) or a hub repo id
    ``org/name[@revision]`` read from the Hugging Face cache. ``format``: ``onnx``,
    ``openvino``, ``executorch`` or ``dynamo`` (.pt2).

    ``options`` are the flags of ``hfexport export --help`` with ``_`` for ``-``:
    ``task`` (str), ``dtype`` (``float32``/``float16``/``bfloat16``), ``dynamic`` (bool),
    ``dynamic_shapes`` (dict or JSON file), ``config`` (the export config: dict or JSON
    file), ``force`` (bool: replace a non-empty ``output``), ``for_generation`` (bool),
    ``static_cache`` (int), ``multi_token_decode`` (bool), ``genai`` (bool), ``quantize``
    (``int4``/``int8``), ``latent_attention`` (str), ``image_size`` (int or ``(height, width)``:
    the images an image model's graph takes) and ``verify`` (bool: run the export in its
    runtime against the reference evaluator; the runtime is loaded from this environment,
    e.g. ``pip install onnxruntime``). ``True`` gives the flag, ``False`` and ``None`` leave it
    out.

    ``progress``: ``True`` (default) draws a tqdm bar when tqdm is installed and prints lines
    on stderr otherwise; ``None`` or ``False`` is silent; a callable gets one dict per event
    (``event`` is ``note``, ``weight``, ``weights_written`` or ``verify``).

    Returns the export's ``export.json`` as a dict. Raises :class:`HfExportError` with the
    command line's message when the options or the checkpoint are refused or the export
    fails; the output folder then does not appear.
    """
    args = ["--model", os.fspath(model), "--format", format, "--output", os.fspath(output)]
    args += _flags(options)
    if progress is True:
        with default_progress() as callback:
            return json.loads(_native.export(args, callback))
    callback = progress if callable(progress) else None
    return json.loads(_native.export(args, callback))


def inspect(path: PathLike, *, task: Optional[str] = None, check: bool = False) -> Dict[str, Any]:
    """``hfexport inspect --json``: an export folder's ``export.json`` as a dict, or a
    checkpoint's facts (architecture, sizes, rope, parameters, stored dtypes, graph ports) for
    ``task`` (default: the task of its class).

    ``check``: first read every file of the export folder back against the sizes and CRC-32s
    export.json records (``hfexport inspect --check``); a damaged or truncated file raises
    :class:`HfExportError` naming it.
    """
    return json.loads(_native.inspect(os.fspath(path), task, check))


def _flags(options: Dict[str, Any]) -> List[str]:
    """Keyword arguments as command-line flags: ``static_cache=64`` is ``--static-cache 64``,
    ``True`` the bare flag, ``False``/``None`` nothing, a dict inline JSON, a list or tuple its
    items joined by commas (``image_size=(224, 192)`` is ``--image-size 224,192``)."""
    args: List[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, dict):
            args += [flag, json.dumps(value)]
        elif isinstance(value, os.PathLike):
            args += [flag, os.fspath(value)]
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args
