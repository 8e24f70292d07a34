"""Which `.pt2` programs retracing can tell apart, shared by run_pt2.py and generate_pt2.py.

`ep.run_decompositions()` + `torch.export.save` + `torch.export.load` retraces a program: it
fails on an operator or a shape guard, never on a weight value or a layer count, and it is most
of the torch scripts' time (seconds a program). So each script retraces one program per kind: the
operators it calls and the symbolic axes of its inputs (a constant axis, a head count or a
layer's head dim, is `#`; the number of inputs does not count)."""
import json
import zipfile


def program_kind(path, name, inputs):
    """The kind of program `name` of the archive `path`, whose inputs export.json lists."""
    with zipfile.ZipFile(path) as z:
        (program,) = [e for e in z.namelist() if e.endswith(f"/models/{name}.json")]
        nodes = json.loads(z.read(program))["graph_module"]["graph"]["nodes"]
    ops = sorted({n["target"] for n in nodes})
    shapes = sorted({tuple("#" if d.isdigit() else d for d in p["shape"]) for p in inputs})
    return json.dumps([ops, shapes])

